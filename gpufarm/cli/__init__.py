"""The `gpufarm` command: synth, plan, cost, preflight and review."""

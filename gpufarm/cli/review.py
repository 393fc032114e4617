"""`gpufarm review`: a Markdown report of what a change to the cloud assembly does.

`gpufarm review BASE HEAD` compares two `cdk.out` folders (main and a pull request);
`gpufarm review DIR` summarizes one. Exit status: 0 when the report is written, 1 when it is
written and a `--fail-on` gate trips (one line per gate on standard error), 2 on bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from gpufarm.cli._output import EXIT_CHECK_FAILED, EXIT_OK, bad_input, emit_json, errors, markdown, progress


def register(app: typer.Typer) -> None:
    """Add the `review` command to the app."""

    @app.command()
    def review(
        first: Annotated[
            Path,
            typer.Argument(
                metavar="BASE_OR_DIR",
                help="The base cloud assembly (cdk.out of main), or the only one to summarize.",
            ),
        ],
        second: Annotated[
            Path | None,
            typer.Argument(metavar="[HEAD]", help="The head cloud assembly (cdk.out of the pull request)."),
        ] = None,
        output: Annotated[
            Path | None,
            typer.Option("--output", "-o", help="Write the report to this file instead of standard output."),
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="Write the review as JSON, not Markdown.")
        ] = False,
        fail_on: Annotated[
            list[str] | None,
            typer.Option(
                "--fail-on",
                metavar="GATE",
                help=(
                    "Exit 1 after writing the report when the change trips GATE: replacement, exposure, "
                    "iam or cost>N (USD a month). Repeat it or give a comma list."
                ),
            ),
        ] = None,
    ) -> None:
        """Report replacements, public exposure, IAM, GPU capacity and cost changes between assemblies."""
        from gpufarm.assembly import AssemblyError
        from gpufarm.review import render_markdown, review_paths
        from gpufarm.review.gates import GateError, parse_gates, tripped

        try:
            gates = parse_gates(fail_on or [])
        except GateError as exc:
            bad_input(f"gpufarm review: {exc}")
        if gates and second is None:
            bad_input(
                "gpufarm review: --fail-on compares two assemblies; give BASE and HEAD "
                f"(got only {str(first)!r})"
            )
        base, head = (first, second) if second is not None else (None, first)
        try:
            with progress("Reading cloud assemblies", quiet=as_json):
                result = review_paths(base, head)
        except AssemblyError as exc:
            bad_input(f"gpufarm review: {exc}")
        if output is None:
            if as_json:
                emit_json(result.to_dict())
            else:
                markdown(render_markdown(result))
        else:
            text = (
                json.dumps(result.to_dict(), indent=2, sort_keys=True) + "\n"
                if as_json
                else render_markdown(result)
            )
            try:
                output.write_text(text)
            except OSError as exc:
                bad_input(f"gpufarm review: cannot write {str(output)!r}: {exc.strerror or exc}")
        found = tripped(result, gates)
        for line in found:
            errors.print(f"gpufarm review: --fail-on {line}", markup=False)
        raise typer.Exit(EXIT_CHECK_FAILED if found else EXIT_OK)

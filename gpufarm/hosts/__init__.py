"""What runs on the instances of `cluster.provisioning: ec2`: user data, systemd units and agent
configs as plain text, built from the tier config (no CDK import), so they can be read and tested
without synthesizing a stack. The constructs in `gpufarm.constructs.gpu_fleet` and
`gpufarm.constructs.gateway_fleet` put them into launch templates.
"""

"""boto3 code used by the `gpufarm` command (preflight checks, live prices).

Never imported while synthesizing: the CDK app and the constructs run offline.
"""

"""The Lambda handler that provisions Grafana data sources and dashboards (see :mod:`.index`)."""

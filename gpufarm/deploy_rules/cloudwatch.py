"""Amazon CloudWatch: what PutMetricAlarm and PutDashboard refuse in alarms and dashboards."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_int, literal_str
from gpufarm.deploy_rules.shapes import TOKEN, each, name_rule, render, resource

ALARM = "AWS::CloudWatch::Alarm"
DASHBOARD = "AWS::CloudWatch::Dashboard"

_PUT_METRIC_ALARM = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html"
_METRIC_DATA_QUERY = (
    "https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_MetricDataQuery.html"
)
_PUT_DASHBOARD = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutDashboard.html"
_DASHBOARD_BODY = (
    "https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/"
    "CloudWatch-Dashboard-Body-Structure.html#Dashboard-Body-Overall-Structure"
)

ONE_HOUR = 3_600
ONE_DAY = 86_400
SEVEN_DAYS = 604_800
MAX_WIDGETS = 500
MAX_QUERIES = 20
MAX_QUERIES_OF_A_KIND = 10


def _periods(res: Resource) -> Iterator[tuple[str, int]]:
    """The alarm's literal periods: `Period`, or each metric-math query's own period."""
    period = literal_int(res.prop("Period"))
    if period is not None:
        yield "Period", period
    for i, query in enumerate(each(res.prop("Metrics"))):
        stat = query.get("MetricStat")
        nested = literal_int(stat.get("Period")) if isinstance(stat, dict) else None
        own = literal_int(query.get("Period"))
        for where, value in (("MetricStat.Period", nested), ("Period", own)):
            if value is not None:
                yield f"Metrics[{i}].{where}", value


def _evaluation_range(res: Resource, _template: Template) -> Iterator[str]:
    # PutMetricAlarm, Period: "Period multiplied by EvaluationPeriods can't be more than 604,800
    # seconds. For alarms with a period of less than one hour (3,600 seconds), the total
    # evaluation period can't be longer than one day (86,400 seconds)."
    evaluations = literal_int(res.prop("EvaluationPeriods"))
    if evaluations is None:
        return
    for where, period in _periods(res):
        limit = ONE_DAY if period < ONE_HOUR else SEVEN_DAYS
        if period * evaluations > limit:
            yield (
                f"{where} {period} s x EvaluationPeriods {evaluations} = {period * evaluations} s; "
                f"the most an alarm with this period can evaluate is {limit} s"
            )


def _datapoints(res: Resource, _template: Template) -> Iterator[str]:
    # PutMetricAlarm: DatapointsToAlarm is "the number of data points that must be breaching to
    # trigger the alarm ... an "M out of N" alarm. In that case, this value is the M", and
    # EvaluationPeriods "is the N": M out of N cannot exceed N.
    datapoints = literal_int(res.prop("DatapointsToAlarm"))
    evaluations = literal_int(res.prop("EvaluationPeriods"))
    if datapoints is not None and evaluations is not None and datapoints > evaluations:
        yield (
            f"DatapointsToAlarm {datapoints} exceeds EvaluationPeriods {evaluations} "
            "(M out of N needs M <= N)"
        )


def _one_return_data(res: Resource, _template: Template) -> Iterator[str]:
    # MetricDataQuery, ReturnData: "When used in PutMetricAlarm, specify true for the one
    # expression result to use as the alarm. For all other metrics and expressions in the same
    # PutMetricAlarm operation, specify ReturnData as False." Omitted, it defaults to true.
    queries = list(each(res.prop("Metrics")))
    if not queries or any(literal_str(q.get("ReturnData", True)) is None for q in queries):
        return
    returned = [
        literal_str(q.get("Id")) or str(i)
        for i, q in enumerate(queries)
        if literal_str(q.get("ReturnData", True)) == "true"
    ]
    if len(returned) != 1:
        yield (
            f"{len(returned)} metric queries return data ({', '.join(returned) or 'none'}); exactly one "
            "must (ReturnData defaults to true, set it to false on the others)"
        )


def _query_counts(res: Resource, _template: Template) -> Iterator[str]:
    # MetricDataQuery: "A single PutMetricAlarm call can include up to 20 MetricDataQuery
    # structures in the array. The 20 structures can include as many as 10 structures that
    # contain a MetricStat parameter to retrieve a metric, and as many as 10 structures that
    # contain the Expression parameter to perform a math expression."
    queries = list(each(res.prop("Metrics")))
    stats = sum(1 for q in queries if "MetricStat" in q)
    expressions = sum(1 for q in queries if "Expression" in q)
    if len(queries) > MAX_QUERIES:
        yield f"{len(queries)} metric queries; an alarm takes at most {MAX_QUERIES}"
    if stats > MAX_QUERIES_OF_A_KIND:
        yield f"{stats} MetricStat queries; an alarm takes at most {MAX_QUERIES_OF_A_KIND}"
    if expressions > MAX_QUERIES_OF_A_KIND:
        yield f"{expressions} Expression queries; an alarm takes at most {MAX_QUERIES_OF_A_KIND}"


_QUERY_ID = re.compile(r"[a-z][A-Za-z0-9_]*")


def _query_ids(res: Resource, _template: Template) -> Iterator[str]:
    # MetricDataQuery, Id: "The valid characters are letters, numbers, and underscore. The first
    # character must be a lowercase letter." The name "must be unique" among the queries, as
    # expressions name the others by it.
    seen: set[str] = set()
    for i, query in enumerate(each(res.prop("Metrics"))):
        query_id = literal_str(query.get("Id"))
        if query_id is None:
            continue
        if not _QUERY_ID.fullmatch(query_id):
            yield (
                f"Metrics[{i}].Id {query_id!r} must start with a lowercase letter and hold only "
                "letters, digits and '_'"
            )
        if query_id in seen:
            yield f"Metrics[{i}].Id {query_id!r} is used twice; query IDs must be unique"
        seen.add(query_id)


def _widgets(res: Resource, _template: Template) -> Iterator[str]:
    # Dashboard body structure: "It can include an array of between 0 and 500 widget objects".
    body = render(res.prop("DashboardBody"))
    if body is None:
        return
    try:
        document = json.loads(body, strict=False)
    except ValueError:
        if TOKEN not in body:
            yield "DashboardBody is not valid JSON"
        return
    widgets = document.get("widgets") if isinstance(document, dict) else None
    if isinstance(widgets, list) and len(widgets) > MAX_WIDGETS:
        yield f"DashboardBody has {len(widgets)} widgets; a dashboard holds at most {MAX_WIDGETS}"


def _alarm(**properties: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ComparisonOperator": "GreaterThanThreshold",
        "EvaluationPeriods": 3,
        "Threshold": 1,
    }
    return resource(ALARM, **{**base, **properties})


_METRIC = {"MetricName": "RequestCount", "Namespace": "AWS/ApplicationELB", "Statistic": "Sum"}


def _query(query_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "Id": query_id,
        "MetricStat": {
            "Metric": {"MetricName": "RequestCount", "Namespace": "AWS/ApplicationELB"},
            "Period": 60,
            "Stat": "Sum",
        },
        **extra,
    }


def _sum_of(metrics: int) -> list[dict[str, Any]]:
    """Queries summing `metrics` metrics (one per model, say) in one returned expression."""
    ids = [f"m{i}" for i in range(metrics)]
    return [*(_query(i, ReturnData=False) for i in ids), {"Id": "total", "Expression": " + ".join(ids)}]


def _body(widget_count: int) -> str:
    text = {"type": "text", "width": 6, "height": 1, "properties": {"markdown": "m"}}
    return json.dumps({"widgets": [text] * widget_count})


RULES: tuple[Rule, ...] = (
    Rule(
        id="CW-ALARM-EVALUATION-RANGE",
        resource_type=ALARM,
        title="Period times evaluation periods is at most one day (periods under an hour) or seven days",
        doc_url=_PUT_METRIC_ALARM,
        check=_evaluation_range,
        bad={"Alarm": _alarm(Period=300, EvaluationPeriods=300, **_METRIC)},
        good={"Alarm": _alarm(Period=300, EvaluationPeriods=288, **_METRIC)},
    ),
    Rule(
        id="CW-ALARM-DATAPOINTS",
        resource_type=ALARM,
        title="Datapoints to alarm are at most the evaluation periods",
        doc_url=_PUT_METRIC_ALARM,
        check=_datapoints,
        bad={"Alarm": _alarm(Period=60, DatapointsToAlarm=5, **_METRIC)},
        good={"Alarm": _alarm(Period=60, DatapointsToAlarm=3, **_METRIC)},
    ),
    Rule(
        id="CW-ALARM-ONE-RETURN-DATA",
        resource_type=ALARM,
        title="A metric-math alarm returns exactly one query",
        doc_url=_METRIC_DATA_QUERY,
        check=_one_return_data,
        bad={"Alarm": _alarm(Metrics=[_query("m1"), {"Id": "e1", "Expression": "m1 * 2"}])},
        good={
            "Alarm": _alarm(Metrics=[_query("m1", ReturnData=False), {"Id": "e1", "Expression": "m1 * 2"}])
        },
    ),
    Rule(
        id="CW-ALARM-METRIC-QUERIES",
        resource_type=ALARM,
        title="A metric-math alarm has at most 20 queries, 10 metrics and 10 expressions",
        doc_url=_METRIC_DATA_QUERY,
        check=_query_counts,
        bad={"Alarm": _alarm(Metrics=_sum_of(11))},
        good={"Alarm": _alarm(Metrics=_sum_of(10))},
    ),
    Rule(
        id="CW-ALARM-QUERY-IDS",
        resource_type=ALARM,
        title="Metric-math query IDs start with a lowercase letter, hold letters, digits and '_', "
        "and are unique",
        doc_url=_METRIC_DATA_QUERY,
        check=_query_ids,
        bad={
            "Alarm": _alarm(
                Metrics=[_query("Errors", ReturnData=False), {"Id": "e1", "Expression": "Errors"}]
            )
        },
        good={
            "Alarm": _alarm(
                Metrics=[_query("errors", ReturnData=False), {"Id": "e1", "Expression": "errors"}]
            )
        },
    ),
    name_rule(
        id="CW-DASHBOARD-NAME",
        resource_type=DASHBOARD,
        title="A dashboard name has at most 255 letters, digits, '-' and '_'",
        prop="DashboardName",
        # PutDashboard, DashboardName: "The maximum length is 255, and valid characters are A-Z,
        # a-z, 0-9, "-", and "_"."
        pattern=r"[A-Za-z0-9_-]+",
        max_length=255,
        allowed="letters, digits, '-' and '_'",
        doc_url=_PUT_DASHBOARD,
        bad="gpufarm.poc",
        good="gpufarm-poc",
        DashboardBody=_body(1),
    ),
    Rule(
        id="CW-DASHBOARD-WIDGETS",
        resource_type=DASHBOARD,
        title="A dashboard body is JSON with at most 500 widgets",
        doc_url=_DASHBOARD_BODY,
        check=_widgets,
        bad={"D": resource(DASHBOARD, DashboardBody=_body(MAX_WIDGETS + 1))},
        good={"D": resource(DASHBOARD, DashboardBody=_body(MAX_WIDGETS))},
    ),
)

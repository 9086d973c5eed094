"""The policy rules on built plans (pure): what each rule flags and lets pass, `match`,
enforcement, the words of a violation, and the report's JSON round trip."""

from __future__ import annotations

import pytest

from reconciler import gpus, policy
from reconciler.plans import Action, FieldChange, Plan, ResourceChange
from tests.helpers.finishing import finished
from tests.helpers.examples import inference_body, training_body
from tests.helpers.policy import dt, rules


def di(name: str, replicas: int = 1, action: Action = Action.CREATE) -> ResourceChange:
    return ResourceChange(address=f"DistributedInference/7/{name}", kind="DistributedInference",
                          name=name, project_id="7", action=action, reason="new",
                          after=inference_body(name, replicas), desired_phase="Running")


def check(plan: Plan, *entries: dict) -> policy.Report:
    return finished(plan, rules(*entries)).policy


def messages(report: policy.Report) -> list[str]:
    return [v.message for r in report.rules for v in r.violations]


def test_max_gpus_per_workload_names_the_address_the_rule_and_the_gpus():
    # 4 workers x 8 + a master like a worker: 40 GPUs.
    report = check(Plan([dt("llama-ft"), dt("small", workers=1)]),
                   {"name": "gpu-cap", "maxGpusPerWorkload": 16})
    assert messages(report) == [
        "DistributedTraining/7/llama-ft: rule gpu-cap (maxGpusPerWorkload 16): 40 GPUs"]
    assert not report.passed and report.rules[0].status == "failed"


def test_a_workload_being_deleted_is_not_checked_by_per_workload_rules():
    gone = dt("old", Action.DELETE, before=training_body("old"))
    report = check(Plan([gone]), {"name": "cap", "maxGpusPerWorkload": 1},
                   {"name": "reg", "allowedImages": ["registry.example.com/*"]},
                   {"name": "labels", "requiredLabels": ["team"]},
                   {"name": "pin", "forbidLatestTag": True})
    assert report.passed and messages(report) == []


def test_what_the_plan_leaves_alone_is_pre_existing_unless_the_rule_has_scope_all():
    steady = dt("steady", Action.NOOP, before=training_body("steady"))
    for action in (Action.NOOP, Action.SUSPEND):
        report = check(Plan([dt("steady", action, before=training_body("steady"))]),
                       {"name": "cap", "maxGpusPerWorkload": 16})
        assert report.passed and messages(report) == [], action
        assert [v.message for v in report.rules[0].preexisting] == [
            "DistributedTraining/7/steady: rule cap (maxGpusPerWorkload 16): 40 GPUs"]
        assert report.summary() == "1 rule: 1 passed; 1 pre-existing violation"
    for action in (Action.CREATE, Action.UPDATE, Action.REPLACE, Action.RESUME):
        changed = dt("steady", action, before=training_body("steady"))
        report = check(Plan([changed]), {"name": "cap", "maxGpusPerWorkload": 16})
        assert not report.passed and not report.rules[0].preexisting, action
    everything = check(Plan([steady]), {"name": "cap", "maxGpusPerWorkload": 16, "scope": "all"})
    assert messages(everything) == [
        "DistributedTraining/7/steady: rule cap (maxGpusPerWorkload 16): 40 GPUs"]
    assert not everything.passed


def test_an_autoscaled_range_is_judged_at_its_most_pods():
    rc = ResourceChange(address="Inference/7/chat", kind="Inference", name="chat",
                        project_id="7", action=Action.CREATE, reason="new",
                        desired_phase="Running",
                        after={"name": "chat", "spec": {
                            "image": "vllm/vllm-openai:v0.6.3", "compute": {"gpuDevicesRequest": 1},
                            "autoscaling": {"minReplicas": 1, "maxReplicas": 4}}})
    assert messages(check(Plan([rc]), {"name": "cap", "maxGpusPerWorkload": 3})) == [
        "Inference/7/chat: rule cap (maxGpusPerWorkload 3): 1..4 GPUs"]
    assert check(Plan([rc]), {"name": "cap", "maxGpusPerWorkload": 4}).passed


def test_max_gpus_per_project_by_id_by_name_and_star():
    plan = Plan([dt("a", project="7", project_name="team-a"), dt("b", project="9")])
    by_name = check(plan, {"name": "p", "maxGpusPerProject": {"team-a": 39, "*": 100}})
    assert messages(by_name) == ["project 7 (team-a): rule p (maxGpusPerProject team-a: 39, "
                                 "*: 100): 40 GPUs planned (now 0), limit 39"]
    star = check(plan, {"name": "p", "maxGpusPerProject": {"7": 100, "*": 10}})
    assert [v.address for v in star.rules[0].violations] == ["project 9"]
    assert check(plan, {"name": "p", "maxGpusPerProject": {"12": 1}}).passed


def test_a_project_over_its_limit_that_the_plan_does_not_raise_is_a_note_not_a_violation():
    before = training_body("a")  # 40 GPUs live; the spec asks for 2 workers: 24
    shrink = dt("a", Action.REPLACE, workers=2, before=before)
    report = check(Plan([shrink]), {"name": "p", "maxGpusPerProject": {"*": 10}})
    assert report.passed and messages(report) == []
    assert report.rules[0].notes == (
        "project 7: 24 GPUs planned (now 40), limit 10; not raised by this plan",)
    every = check(Plan([dt("a", Action.REPLACE, workers=2, before=before)]),
                  {"name": "p", "maxGpusPerProject": {"*": 10}, "scope": "all"})
    assert messages(every) == ["project 7: rule p (maxGpusPerProject *: 10): 24 GPUs planned "
                               "(now 40), limit 10"]


def _three_projects() -> Plan:
    plan = Plan([dt("a"), dt("b", project="9"), dt("c", project="12")])
    plan.gpu_quotas = {"7": 32.0, "9": 64.0, "12": None}
    plan.quota_unknown = {"12": "GET /api/v1/org-unit/projects/12 failed: 500 Internal Server Error"}
    return plan


def test_within_project_quota_reads_the_quotas_and_fails_where_one_is_unknown():
    report = check(_three_projects(), {"name": "quota", "withinProjectQuota": True})
    assert messages(report) == [
        "project 7: rule quota (withinProjectQuota): 40 GPUs planned (now 0), quota 32",
        "project 12: rule quota (withinProjectQuota): could not be checked: its GPU quota is "
        "unknown (GET /api/v1/org-unit/projects/12 failed: 500 Internal Server Error); 40 GPUs "
        "planned (now 0)"]
    assert [v.unknown for v in report.rules[0].violations] == [False, True]


def test_on_unknown_warn_notes_an_unknown_quota_and_lets_it_pass():
    report = check(_three_projects(), {"name": "quota", "withinProjectQuota": True,
                                       "onUnknown": "warn"})
    assert len(messages(report)) == 1  # project 7's, over its known quota
    assert report.rules[0].notes == (
        "project 12: its GPU quota is unknown (GET /api/v1/org-unit/projects/12 failed: 500 "
        "Internal Server Error); 40 GPUs planned (now 0); not checked",)


def test_a_quota_read_as_no_limit_passes_with_a_note():
    plan = Plan([dt("a")])
    plan.gpu_quotas, plan.quota_unknown = {"7": None}, {}  # read: a negative deserved
    report = check(plan, {"name": "quota", "withinProjectQuota": True})
    assert report.passed and report.rules[0].status == "passed"
    assert report.rules[0].notes == ("project 7: no GPU quota limit (a negative deserved); "
                                     "passed",)


def test_an_unknown_quota_that_the_plan_does_not_raise_cannot_be_broken():
    before = training_body("a")
    plan = Plan([dt("a", Action.REPLACE, workers=2, before=before)])  # 40 -> 24
    plan.gpu_quotas, plan.quota_unknown = {"7": None}, {"7": "answered 403"}
    report = check(plan, {"name": "quota", "withinProjectQuota": True})
    assert report.passed and messages(report) == []
    assert report.rules[0].notes == ("project 7: quota unknown (answered 403); not raised by "
                                     "this plan",)


def test_without_a_refresh_the_quota_rule_fails_closed_or_with_on_unknown_warn_is_unchecked():
    report = check(Plan([dt("a")]), {"name": "quota", "withinProjectQuota": True})
    assert not report.passed and report.rules[0].status == "failed"
    assert messages(report) == [
        "project 7: rule quota (withinProjectQuota): could not be checked: its GPU quota is "
        "unknown (not read: the plan was made with --no-refresh); 40 GPUs planned (now 0)"]
    lax = check(Plan([dt("a")]), {"name": "quota", "withinProjectQuota": True,
                                  "onUnknown": "warn"})
    assert lax.passed and lax.rules[0].status == "unchecked"
    assert lax.summary() == "1 rule: 1 unchecked"


def test_allowed_images_checks_every_container():
    plan = Plan([di("serve"), dt("ok")])
    report = check(plan, {"name": "reg", "allowedImages": ["nvcr.io/*"]})
    assert messages(report) == [
        'DistributedInference/7/serve: rule reg (allowedImages nvcr.io/*): spec.leader.image '
        '"vllm/vllm-openai:v0.6.3"; spec.worker.image "vllm/vllm-openai:v0.6.3"']


def test_allowed_images_checks_a_distributed_trainings_master_too():
    rc = dt("mpi")
    rc.after = {**rc.after, "masterSpecSameAsWorker": False,
                "masterSpec": {"image": "docker.io/mpi:1", "compute": {}}}
    report = check(Plan([rc]), {"name": "reg", "allowedImages": ["nvcr.io/*"]})
    assert messages(report) == ['DistributedTraining/7/mpi: rule reg (allowedImages nvcr.io/*): '
                                'masterSpec.image "docker.io/mpi:1"']


def test_required_labels_names_what_is_missing():
    report = check(Plan([dt("a")]), {"name": "labels", "requiredLabels": ["team", "cost-center"]})
    assert messages(report) == ["DistributedTraining/7/a: rule labels (requiredLabels team, "
                                "cost-center): spec.labels lacks team, cost-center"]
    rc = dt("b")
    rc.after["spec"]["labels"] = [{"name": "team", "value": "nlp"}]
    assert check(Plan([rc]), {"name": "labels", "requiredLabels": ["team"]}).passed


@pytest.mark.parametrize("image,bad", [
    ("nvcr.io/nvidia/pytorch", True), ("nvcr.io/nvidia/pytorch:latest", True),
    ("registry.example.com:5000/team/train", True), ("registry.example.com:5000/train:1.2", False),
    ("nvcr.io/nvidia/pytorch@sha256:" + "a" * 64, False), ("pytorch:24.05-py3", False)])
def test_forbid_latest_tag_no_tag_counts_as_latest(image, bad):
    report = check(Plan([dt("a", image=image)]), {"name": "pin", "forbidLatestTag": True})
    assert report.passed is not bad
    if bad:
        assert messages(report)[0].startswith(f'DistributedTraining/7/a: rule pin '
                                              f'(forbidLatestTag): spec.image "{image}"')


def test_max_destructive_counts_deletes_and_replaces():
    plan = Plan([dt("a", Action.DELETE, before=training_body("a")),
                 dt("b", Action.REPLACE, before=training_body("b"),
                    changes=[FieldChange("spec.image", "x", "y", forces_replacement=True)]),
                 dt("c"), dt("d", Action.UPDATE, before=training_body("d"))])
    assert check(plan, {"name": "blast", "maxDestructive": 2}).passed
    assert messages(check(plan, {"name": "blast", "maxDestructive": 1})) == [
        "plan: rule blast (maxDestructive 1): 2 deletes and replaces "
        "(DistributedTraining/7/a, DistributedTraining/7/b)"]


def test_match_by_kind_project_name_and_name_glob():
    plan = Plan([dt("llama-ft", project_name="team-a"), dt("bert", project_name="team-a"),
                 dt("llama-x", project="9"), di("llama-serve")])
    cap = {"name": "cap", "maxGpusPerWorkload": 1}
    got = check(plan, {**cap, "match": {"kinds": ["DistributedTraining"],
                                        "projects": ["team-a", "9"], "names": ["llama-*"]}})
    assert sorted(v.address for v in got.rules[0].violations) == [
        "DistributedTraining/7/llama-ft", "DistributedTraining/9/llama-x"]
    by_id = check(plan, {**cap, "match": {"projects": ["9"]}})
    assert [v.address for v in by_id.rules[0].violations] == ["DistributedTraining/9/llama-x"]


def test_warn_reports_without_failing_and_failures_come_first():
    report = check(Plan([dt("a")]),
                   {"name": "labels", "requiredLabels": ["cost-center"], "enforcement": "warn"},
                   {"name": "blast", "maxDestructive": 3},
                   {"name": "cap", "maxGpusPerWorkload": 8})
    assert not report.passed
    assert [(r.name, r.status) for r in report.ordered()] == [
        ("cap", "failed"), ("labels", "warned"), ("blast", "passed")]
    assert report.summary() == "3 rules: 1 failed, 1 warned, 1 passed"
    warn_only = check(Plan([dt("a")]), {"name": "labels", "requiredLabels": ["x"],
                                        "enforcement": "warn"})
    assert warn_only.passed and warn_only.warned


def test_the_report_survives_a_saved_plan():
    from reconciler import planfile

    plan = Plan([dt("a"), dt("old", Action.NOOP, image="x:latest")])
    report = check(plan, {"name": "cap", "maxGpusPerWorkload": 8},
                   {"name": "quota", "withinProjectQuota": True, "onUnknown": "warn"},
                   {"name": "p", "maxGpusPerProject": {"*": 100}, "enforcement": "warn"},
                   {"name": "pin", "forbidLatestTag": True})
    again = planfile.decode(planfile.encode(planfile.SavedPlan(plan, [], {}))).plan.policy
    assert again == report
    assert [r.status for r in again.ordered()] == ["failed", "unchecked", "passed", "passed"]
    assert again.rules[3].preexisting and again.summary() == report.summary()


@pytest.mark.parametrize("entry,word", [
    ({"name": "x"}, "a rule needs one of"),
    ({"name": "x", "maxDestructive": 1, "forbidLatestTag": True}, "has one rule key"),
    ({"name": "x", "maxDestructive": -1}, "greater than or equal"),
    ({"name": "x", "maxDestructive": 1, "enforcement": "block"}, "'deny' or 'warn'"),
    ({"name": "x", "allowedImages": []}, "at least 1 item"),
])
def test_bad_rules_are_refused_by_the_model(entry, word):
    with pytest.raises(Exception) as err:
        policy.PolicyFile.model_validate({"rules": [entry]})
    assert word in str(err.value)


def _unreadable(action: Action, gpus_value) -> ResourceChange:
    """A Manifest whose pods' nvidia.com/gpu cannot be read (a body no checked spec holds:
    live's, or a damaged saved plan's)."""
    body = {"name": "job", "manifest": {"apiVersion": "batch/v1", "kind": "Job", "spec": {
        "parallelism": 2, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus_value}}}]}}}}}
    return ResourceChange(address="Manifest/7/job", kind="Manifest", name="job",
                          project_id="7", action=action, reason="new", after=body,
                          before=body if action is not Action.CREATE else None,
                          desired_phase="Running")


@pytest.mark.parametrize("value", ["lots", -8, 8.5])
def test_a_gpu_count_that_cannot_be_read_does_not_pass_a_cap(value):
    report = check(Plan([_unreadable(Action.CREATE, value)]),
                   {"name": "cap", "maxGpusPerWorkload": 30})
    assert not report.passed
    assert messages(report) == ["Manifest/7/job: rule cap (maxGpusPerWorkload 30): could not "
                                "be checked: its GPUs could not be read (0 counted)"]
    assert report.rules[0].violations[0].unknown
    per_project = check(Plan([_unreadable(Action.CREATE, value)]),
                        {"name": "p", "maxGpusPerProject": {"*": 30}})
    assert not per_project.passed and "could not be read" in messages(per_project)[0]


def test_an_unreadable_count_the_plan_leaves_alone_is_a_note():
    report = check(Plan([_unreadable(Action.NOOP, "lots")]),
                   {"name": "cap", "maxGpusPerWorkload": 30})
    assert report.passed and messages(report) == []
    assert report.rules[0].notes == (
        "Manifest/7/job: its GPUs could not be read (0 counted); not changed by this plan",)

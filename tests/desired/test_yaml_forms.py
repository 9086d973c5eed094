"""Values quoted as the user wrote them, and YAML 1.1's surprises: forms that YAML 1.2
reads as another value (octal `017`, base-60 `12:30`) are refused, forms that YAML 1.2
reads as text (`yes`, `on`, `0b11`, `1_000`) load with a warning."""

from __future__ import annotations

import pytest

from reconciler.desired import load_specs
from reconciler.errors import SpecError

from tests.helpers.constants import CLUSTER


def training(spec: str, top: str = "") -> str:
    return (f"kind: Training\nname: t\nprojectId: \"7\"\nclusterId: {CLUSTER}\n{top}"
            f"spec:\n  image: x\n{spec}")


def problems_of(specdir, text: str) -> list[str]:
    specdir.write("t.yaml", text)
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    prefix = f"{specdir.root / 't.yaml'}:"
    assert all(p.startswith(prefix) for p in exc.value.problems)
    return [p.removeprefix(prefix) for p in exc.value.problems]


@pytest.mark.parametrize(("written", "message"), [
    ("12:30", 'got 12:30 (YAML reads it as 750; quote it: "12:30")'),
    ("017", 'got 017 (YAML reads it as 15; quote it: "017")'),
    ("0x10", 'got 0x10 (YAML reads it as 16; quote it: "0x10")'),
    ("1_000", 'got 1_000 (YAML reads it as 1000; quote it: "1_000")'),
    ("1.50", 'got 1.50 (YAML reads it as 1.5; quote it: "1.50")'),
    ("yes", 'got yes (YAML reads it as true; quote it: "yes")'),
    ("Off", 'got Off (YAML reads it as false; quote it: "Off")'),
    ("12", 'got 12 (quote it: "12")'),
    ("true", 'got true (quote it: "true")'),
])
def test_a_type_error_quotes_the_value_as_written(specdir, written, message):
    assert problems_of(specdir, training(f"  workingDir: {written}\n")) == [
        f"7: spec.workingDir: must be a string, {message}"]


def test_an_environment_variable_written_as_a_number_is_quoted_as_written(specdir):
    text = training("  environmentVariables:\n    - name: START\n      value: 8:30\n"
                    "    - name: FLAG\n      value: on\n")
    assert problems_of(specdir, text) == [
        '9: spec.environmentVariables[0].value: must be a string, got 8:30 (YAML reads it as '
        '510; quote it: "8:30")',
        '11: spec.environmentVariables[1].value: must be a string, got on (YAML reads it as '
        'true; quote it: "on")']


def test_a_secret_written_as_a_number_is_not_quoted(specdir):
    text = training("  environmentVariables:\n    - name: DB_PASSWORD\n      value: 12:34:56\n")
    [problem] = problems_of(specdir, text)
    assert problem == ("9: spec.environmentVariables[0].value: must be a string, got "
                       "(sensitive)")


@pytest.mark.parametrize(("field", "written", "message"), [
    ("terminationGracePeriodSeconds", "017",
     "017 is an octal number in YAML 1.1 (15) but a decimal one in YAML 1.2 (17): write the "
     "number meant without a leading zero"),
    ("backoffLimit", "-010",
     "-010 is an octal number in YAML 1.1 (-8) but a decimal one in YAML 1.2 (-10): write "
     "the number meant without a leading zero"),
    ("terminationGracePeriodSeconds", "1:30",
     "1:30 is a base-60 number in YAML 1.1 (90) but text in YAML 1.2: write the number "
     "meant, or quote the text"),
])
def test_a_number_that_yaml_1_2_reads_otherwise_is_refused(specdir, field, written, message):
    assert problems_of(specdir, training(f"  {field}: {written}\n")) == [
        f"7: spec.{field}: {message}"]


def test_a_project_id_written_as_an_octal_number_is_refused(specdir):
    text = f"kind: Training\nname: t\nprojectId: 017\nclusterId: {CLUSTER}\nspec: {{image: x}}\n"
    assert problems_of(specdir, text) == [
        "3: projectId: 017 is an octal number in YAML 1.1 (15) but a decimal one in YAML 1.2 "
        "(17): write the number meant without a leading zero"]


def test_a_refused_form_at_a_sensitive_path_is_not_quoted(specdir):
    text = training("  backoffLimit: 0777\n",
                    top="lifecycle:\n  sensitive: [spec.backoffLimit]\n")
    [problem] = problems_of(specdir, text)
    assert "0777" not in problem and "511" not in problem and "777" not in problem
    assert problem.startswith("9: spec.backoffLimit: (sensitive) is an octal number")


def test_yaml_1_1_only_forms_load_with_a_warning(specdir):
    specdir.write("t.yaml", training("  createHomeDir: yes\n  stdin: On\n  backoffLimit: 1_000\n"
                                     "  terminationGracePeriodSeconds: 0b11\n"))
    [w] = load_specs(specdir.root)
    assert w.body["spec"] == {"image": "x", "createHomeDir": True, "stdin": True,
                              "backoffLimit": 1000, "terminationGracePeriodSeconds": 3}
    where = specdir.root / "t.yaml"
    assert w.warnings == (
        f"{where}:7: spec.createHomeDir: yes is read as true here but as text by YAML 1.2 "
        "and most tools: write true",
        f"{where}:8: spec.stdin: On is read as true here but as text by YAML 1.2 and most "
        "tools: write true",
        f"{where}:9: spec.backoffLimit: 1_000 is read as 1000 here but as text by YAML 1.2 "
        "and most tools: write 1000",
        f"{where}:10: spec.terminationGracePeriodSeconds: 0b11 is read as 3 here but as text "
        "by YAML 1.2 and most tools: write 3")


def test_forms_every_yaml_reads_alike_give_no_warning(specdir):
    specdir.write("t.yaml", training("  createHomeDir: true\n  stdin: False\n  backoffLimit: -5\n"
                                     "  terminationGracePeriodSeconds: 0x10\n"
                                     "  workingDir: '017'\n  command: \"yes\"\n"))
    [w] = load_specs(specdir.root)
    assert w.warnings == ()
    assert w.body["spec"]["terminationGracePeriodSeconds"] == 16
    assert w.body["spec"]["workingDir"] == "017" and w.body["spec"]["command"] == "yes"


def test_a_json_spec_is_quoted_as_written_too(specdir):
    specdir.write("t.json", f'{{"kind": "Training", "name": "t", "projectId": "7", '
                            f'"clusterId": "{CLUSTER}",\n "spec": {{"image": "x",\n'
                            f'  "workingDir": 1.50}}}}')
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    assert exc.value.problems == [
        f'{specdir.root / "t.json"}:3: spec.workingDir: must be a string, got 1.50 (YAML reads '
        'it as 1.5; quote it: "1.50")']

"""`words.shown` (the renderers' quick way to print a value masked) prints exactly what
encoding the fully masked copy prints, whatever the value, its path and the spec's
`lifecycle.sensitive` paths."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.render import words
from tests.helpers.masking_values import VALUES, sensitive_paths

PATHS = st.sampled_from(["", "spec", "spec.environmentVariables", "spec.environmentVariables[API_TOKEN]",
                         "spec.environmentVariables[HOME].value", "spec.compute", "masterSpec.args",
                         "spec.environmentVariables[API_TOKEN].value", "spec.labels"])
SENSITIVE = sensitive_paths("masterSpec")


@settings(max_examples=200, deadline=None)
@given(PATHS, VALUES, SENSITIVE)
def test_shown_is_the_masked_copy_encoded(path, value, sensitive):
    assert words.shown(path, value, tuple(sensitive)) == words.encode(
        words.mask_at(path, value, tuple(sensitive)))


def test_a_secret_named_variable_is_masked_under_any_parent():
    body = {"spec": {"environmentVariables": [{"name": "API_TOKEN", "value": "s3cr3t"},
                                              {"name": "HOME", "value": "/root"}]}}
    text = words.shown("", body)
    assert "s3cr3t" not in text and "/root" in text and words.MASK in text
    assert words.shown("spec", body["spec"]) == text[len('{"spec": '):-1]


def test_a_variables_list_shows_only_its_secret_values_masked():
    env = [{"name": "API_TOKEN", "value": "s3cr3t"}, {"name": "HOME", "value": "/root"},
           {"name": "db_password", "value": None}, {"name": "t]oken", "value": "odd"}, "stray"]
    for value in (env, env + [[{"name": "KEY", "value": "k"}]]):
        text = words.shown("spec.environmentVariables", value)
        assert text == words.encode(words.mask_at("spec.environmentVariables", value))
        assert "s3cr3t" not in text and '"k"' not in text and "/root" in text
    assert words.shown("spec.environmentVariables", env[1:2]) == words.encode(env[1:2])

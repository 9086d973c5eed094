"""`masking.map_sensitive` without `lifecycle.sensitive` paths skips the walk of a body whose
text names no secret: what it returns (and so `has_sensitive`, `hash_sensitive`) is exactly
what the walk returns, whatever the body. A sensitive path that matches nothing makes the
walk run, so it is the yardstick."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import masking

KEY = b"k" * 32
NOWHERE = ("no.such.field",)  # sensitive, matches nothing: the full walk, nothing more

# Names that look like a secret's in every spelling the rule folds: upper, lower, mixed,
# and through Unicode's case folding (a Kelvin sign folds to "k"; a long s to "s").
NAMES = st.sampled_from(["API_TOKEN", "HOME", "db_password", "LOG_LEVEL", "aws-key", "x",
                         "API_\u212aEY", "\u017fecret", "Pwd", "séance", "tolerations", "key",
                         "Key"])
SCALARS = (st.none() | st.integers(min_value=-2**70, max_value=2**70) | st.booleans()
           | st.floats(allow_nan=False) | NAMES | st.text(max_size=6))
ENV = st.lists(st.fixed_dictionaries({"name": NAMES}, optional={"value": SCALARS}), max_size=3)
FIELDS = st.sampled_from(["spec", "compute", "args", "environmentVariables", "env", "value",
                          "name", "key", "image", "tolerations", "containers"])
VALUES = st.recursive(SCALARS | ENV, lambda inner: st.dictionaries(FIELDS, inner, max_size=4)
                      | st.lists(inner, max_size=3), max_leaves=14)
PATHS = st.sampled_from(["", "spec", "spec.environmentVariables",
                         "spec.environmentVariables[API_TOKEN]",
                         "spec.environmentVariables[HOME]", "spec.containers[0].env"])


@settings(max_examples=300, deadline=None)
@given(VALUES, PATHS)
def test_the_quick_path_answers_as_the_walk(body, path):
    def leaf(p, v):
        return masking.keyed_hash(v, KEY)

    quick = masking.map_sensitive(body, (), leaf, path=path)
    walked = masking.map_sensitive(body, NOWHERE, leaf, path=path)
    assert quick == walked
    assert (quick is body) == (walked is body)


def test_a_secret_named_variable_is_found_in_any_case_folding():
    for name in ("API_TOKEN", "api_token", "API_\u212aEY", "\u017fecret_value", "DB_PASSWD",
                 "key"):
        # (Beside a member named `key`, which names no variable.)
        body = {"spec": {"environmentVariables": [{"name": name, "value": "s3cr3t"},
                                                  {"name": "HOME", "value": "/root"}],
                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}
        hashed = masking.hash_sensitive(body, (), KEY)
        assert masking.has_sensitive(body), name
        assert hashed["spec"]["environmentVariables"][0]["value"] == masking.keyed_hash(
            "s3cr3t", KEY)
        assert hashed["spec"]["environmentVariables"][1]["value"] == "/root"


def test_a_body_that_names_no_secret_is_returned_as_it_is():
    body = {"spec": {"environmentVariables": [{"name": "HOME", "value": "token"}],
                     "args": "--tokenizer x", "big": 2**80}}
    assert masking.hash_sensitive(body, (), KEY) is body
    assert not masking.has_sensitive(body)

# A Rego policy over runai-reconcile's plan JSON (`plan --format json`), as OPA, conftest or
# any Rego engine reads it: `opa eval -i plan.json -d policy.rego 'data.runai.plan.deny'`.
# It judges `change.after`, the planned object: what each workload will be once applied,
# the values the server set (and keeps) included, not only what the spec says.
package runai.plan

import rego.v1

serving_types := {"runai_inference", "runai_distributed_inference", "runai_nim_service"}

# The workloads that apply creates or changes, with what each will be.
planned contains [rc.address, rc.type, rc.change.after] if {
	some rc in input.resource_changes
	some action in rc.change.actions
	action in {"create", "update"}
}

# Every image a workload runs, wherever its containers are (spec, masterSpec, a leader
# and its workers, a manifest's pod templates).
images(after) := {image |
	walk(after, [path, image])
	count(path) > 0
	path[count(path) - 1] == "image"
	is_string(image)
}

# An image is pinned by a tag other than `latest`, or by a digest.
unpinned(image) if {
	not contains(image, "@")
	name := regex.replace(image, `^.*/`, "")
	not contains(name, ":")
}

unpinned(image) if {
	not contains(image, "@")
	endswith(image, ":latest")
}

deny contains sprintf("%s: image %s is not pinned to a tag other than latest", [address, image]) if {
	some [address, _, after] in planned
	some image in images(after)
	unpinned(image)
}

# Serving workloads must not be preemptible: what the spec leaves out, the server sets,
# and a change made outside (that the plan keeps) counts as much as the spec.
deny contains sprintf("%s: a serving workload would run preemptible", [address]) if {
	some [address, type, after] in planned
	type in serving_types
	after.spec.preemptibility == "preemptible"
}

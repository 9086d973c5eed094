"""Every read of the live API that planning, drift, import and export make, in one place.

- `reads.Reader`: the one bounded-concurrency reader of workloads (at most `parallelism`
  GETs in flight), with `get` (one kind) and `get_any` (the first of several kinds that
  knows an id);
- `workloads`: one "list a project's workloads and match them by name" (`find_by_name`),
  used by the plan's adoption (`refresh.read_live`) and by `import --all`, and export's
  lists (`list_all`);
- `projects`: the projects' GPU quotas (`read_projects`), the specs' project names to ids
  (`resolve_projects`), and a `--project` id or name to ids (`select_projects`);
- `workload_types`: the control plane's registered workload types, against which a plan
  checks its Manifest specs' apiVersion/kind (`check_manifests`).

Callers: `reconciler.refresh` (the plan's refresh) and `reconciler.operations`. The
executor's own reads (recovery, polling) stay in `reconciler.executor`. Nothing here
writes.
"""

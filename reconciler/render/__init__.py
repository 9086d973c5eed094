"""Renderers: read a finished `plans.Plan` (its changes, GPU impact and policy results, all
made by the planning operation) or a `drift.DriftReport`, or what another command's
operation returned, and return text, markdown or a JSON document; never diff, count GPUs
or check a rule.

    from reconciler.render import text as text_render, json as json_render, markdown
    text_render.render_plan(plan, color=False) -> str
    json_render.plan_document(plan) -> dict;  json_render.render_plan(plan) -> str
    markdown.render_plan(plan) -> str;  markdown.render_drift(report) -> str
    drift.render_text(report), drift.render_json(report) -> str
    commands.export_text(result, out_dir), commands.imported_all(result, where),
    commands.state_list(rows), commands.state_show(record), commands.state_history_text(...)

`words` holds what they share (symbols, headers, masking), `impact` the GPU amounts.
Caller: the CLI.
"""

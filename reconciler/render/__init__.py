"""Renderers: read a finished `plans.Plan` (or `drift.DriftReport`), return text, markdown
or a JSON document; never diff.

    from reconciler.render import text as text_render, json as json_render, markdown
    text_render.render_plan(plan, color=False) -> str
    json_render.plan_document(plan) -> dict;  json_render.render_plan(plan) -> str
    markdown.render_plan(plan) -> str;  markdown.render_drift(report) -> str
    drift.render_text(report), drift.render_json(report) -> str

`words` holds what they share (symbols, headers, masking). Caller: the CLI.
"""

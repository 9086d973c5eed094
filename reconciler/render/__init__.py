"""Renderers: read a finished `plans.Plan`, return text or a JSON document; never diff.

    from reconciler.render import text as text_render, json as json_render
    text_render.render_plan(plan, color=False) -> str
    json_render.plan_document(plan) -> dict;  json_render.render_plan(plan) -> str

`words` holds what they share (symbols, headers, masking). Caller: the CLI.
"""

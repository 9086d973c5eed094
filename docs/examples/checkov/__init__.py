"""checkov loads the custom checks of a folder only when it holds this file."""

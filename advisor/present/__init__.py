"""present: layout of an Advice as text, Markdown or JSON, and its plots."""

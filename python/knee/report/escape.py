"""Untrusted text (response bodies, error messages, scenario strings, group names) made safe for HTML."""

from __future__ import annotations

import html


def esc(value: object) -> str:
    """Any value as HTML text: `<script>` becomes `&lt;script&gt;`, quotes are escaped for attributes too."""
    return html.escape(str(value), quote=True)

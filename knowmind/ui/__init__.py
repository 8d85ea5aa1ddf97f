"""The console's static files (``index.html``, scripts, stylesheet, texts), served at ``/ui``."""

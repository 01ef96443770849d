"""Tests of web/: the ``play --web`` server and the page, in a real Chromium."""

"""Installer analysis for the `pinning` check: pure logic, no side effects beyond reading files.

Reads a plugin's installer and the files it names (shell scripts, Dockerfiles,
requirements / overrides / constraints files, pyproject.toml) into a `PinningReport`.

Shell is tokenized, not grepped: a small scanner (`scanner`) handles line structure
(quotes, `\\` continuations, comments, `&&` / `||` / `;` / `|`, `$(...)`, heredocs)
and `shlex` splits each simple command into words. A small interpreter (`shell`)
expands variables assigned in the script (and `ENV` / `ARG` in Dockerfiles,
`dockerfile`) where their value is static and follows `source`d scripts, `bash -c`
strings and command substitutions; `branches` folds `if`, `case` and loops into
blocks it follows. `requirements` parses pip / uv command lines
and requirement lines; `fetches` tracks downloads, clones and hash checks;
`installs` judges what gets installed; `analyzer` ties them together (`scan`).
"""

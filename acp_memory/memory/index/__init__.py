"""The search index of one root: SQLite FTS5 (BM25) in the cache folder, in step with the files.

`schema.py` opens the database, `terms.py` makes a note's columns and their packed copy,
`sync.py` keeps it in step with the files, `query.py` ranks the notes, `root.py`
joins the last three for one root, and `indexes.py` keeps the open ones of a cache folder, the
most recently used only.
"""

"""The project scope in PostgreSQL, shared by every agent on one repository
(`memory.shared.dsn`): the notes, their history, held changes and vectors live in the
database's `acp_memory` schema under the project's key; each process keeps a local copy of the
key's notes (files, as a disk root has) and its own search index, brought up to date by `seq`.
"""

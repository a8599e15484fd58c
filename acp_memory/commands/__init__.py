"""Built-in slash commands: a prompt whose text starts with `/name` runs the command instead of
a turn, with no automatic memory run and no model call unless the command needs one."""

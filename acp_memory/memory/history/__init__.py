"""Trusting the notes: the journal of every change (and its undo), the changes held for the
user's approval, the recall read stamps, and when and where a note's text came from."""

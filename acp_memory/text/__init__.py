"""Words of notes, below every package that reads them: tokens, stems and stop words
(`analyze.py`), and the file name a note's title gives (`naming.py`); the one 32 KiB bound
of a child's task text (`task_text.py`); and the one cut of a title or label line (`lines.py`)."""

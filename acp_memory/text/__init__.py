"""Words of notes, below every package that reads them: tokens, stems and stop words
(`analyze.py`), and the file name a note's title gives (`naming.py`); the one 32 KiB bound
of a child's task text (`task_text.py`); the one cut of a title or label line (`lines.py`); how
much two texts say the same (`shingles.py`); and the subject a sentence gives a value
(`subjects.py`), which tidying and the offline model share."""

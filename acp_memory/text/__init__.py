"""Words of notes, below every package that reads them: tokens, stems and stop words
(`analyze.py`), and the file name a note's title gives (`naming.py`)."""

"""One module per lesson: ``lessonNN.py`` holds a check function per exercise, named by its slug."""

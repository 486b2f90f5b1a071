"""Reading a session's journal back: the report's data (drawn by vdbbench.pages), plots, the terminal report and compare, and the live view."""

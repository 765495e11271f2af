"""tests/harbor/tasks holds Harbor-format task directories: their tests/ are the tasks' own, run by their test.sh
inside a task's container, never by this suite."""

collect_ignore_glob = ["tasks/*"]

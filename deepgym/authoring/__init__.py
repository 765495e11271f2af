"""The authoring side: what an environment's author runs to prove it judges right (``deepgym check``), and the
action sequences its episodes are replayed from. Nothing in the judging path imports it."""

#!/bin/bash
set -e
python3 /solution/summarise.py

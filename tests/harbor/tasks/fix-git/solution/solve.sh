#!/bin/bash
set -e
cd /app/repo
git -c user.email=agent@deepgym.invalid -c user.name=agent revert --no-edit HEAD~1

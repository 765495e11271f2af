#!/bin/bash
echo "$SENTENCE" | wc -w > /tmp/count.txt

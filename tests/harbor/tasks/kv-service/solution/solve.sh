#!/bin/bash
python3 -c "
import urllib.request
request = urllib.request.Request('http://127.0.0.1:8765/keys/answer', data=b'42', method='PUT')
urllib.request.urlopen(request, timeout=5)
"

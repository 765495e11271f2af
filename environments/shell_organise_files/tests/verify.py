"""Hidden verifier of shell_organise_files: every file where the rules put it, with its contents, and nothing left
in the inbox. The agent's files are read as data (no symlink followed, at most 1 MiB each), never run."""

import hashlib
import os
import stat

# variant -> file name -> [where the rules put it (None: deleted), sha256 of its contents]
EXPECTED = {'0': {'2021-05-01_beach.jpg': ['photos/2021/2021-05-01_beach.jpg',
                                'd671de72f81fc5f1d7c97dac7ffbc648a45d4cdfcc8207e9b6c31b1ce24ec825'],
       '2021-07-09_cat.JPG.txt': ['other/2021-07-09_cat.JPG.txt',
                                  '618915556084d4fa5ff68177317bf9846556dd0e5a6adfd354cfb0013e930340'],
       '2022-01-01_invoice_scan.jpg': ['photos/2022/2022-01-01_invoice_scan.jpg',
                                       '75dcc3a45b3a0dcfbffc8e05f10517403ff07598d2bb53658cdf9dd4e2547272'],
       '2023-12-24_tree.png': ['photos/2023/2023-12-24_tree.png',
                               'c053727b9bd4409d9b8cb79679b6dbc0dfd268146326416d821909777ff3b214'],
       'INVOICE-march.txt': ['invoices/INVOICE-march.txt',
                             '7289f2c8740e166bb6ac88d6d49490a82704d02a56b159918348540e9d23b83c'],
       'cache.tmp': [None, '92da7f2a8305d6c6ec9d8c4d761e72314a7a6d56a7cd7088b62f1a7edc809e2d'],
       'draft.tmp': [None, 'd496fd83c0ddff955a26e9e967ab0ca3c0d8a88160375c9b322f6275e4a188c1'],
       'invoice_0042.pdf': ['invoices/invoice_0042.pdf',
                            '789176a362621719c21106ace939519441bdbb3f29909ce1ff39ad33b2640931'],
       'notes.md': ['other/notes.md', '2230f40f3b41c0ba8276590d17a48f106c0bcb10598ab74f618da80c1eddb10c'],
       'report.pdf': ['other/report.pdf',
                      '9109db199e9efb31a0e58d3f0c55adfe339df91dd7ff8b24effb225d86703fc4']},
 '1': {'api-2024-01-01.log': ['logs/api/api-2024-01-01.log',
                              'e77150bc4598c301707e999a1a3484bbeb1c0ef42df9d907c08d0a6fc1e780c0'],
       'api-2024-01-02.log': ['logs/api/api-2024-01-02.log',
                              '2346c16aec8853eb4bd70c3de21bcb73a52cf7ba40cdc3d608ce14a5e6c9c74a'],
       'config.bak': [None, 'bdc8a992bbbeff897ee42c0f8ac4a2db466bd2084bb875a591723459590c8b9d'],
       'db-main.log': ['logs/db/db-main.log',
                       '5748f556eebaf9135cd97f4a2ea69a0d6550495664e64af93d480905a6e637d8'],
       'logrotate.conf': ['misc/logrotate.conf',
                          '0e73e24ec13fb60f99d63edf824c7109b2e5cc79c7039bace111c884a128c148'],
       'metrics-secret.csv': ['private/metrics-secret.csv',
                              '2d3cd4dd566996e1930239a3c6b2b6b9a9fe113b4ea5b170227bc3c31a7310c0'],
       'old.csv.bak': [None, 'ad31cee170991a7c461e9963e1e89ffb38136a25ac68911067d1fdaf56322ff5'],
       'readme.txt': ['misc/readme.txt', 'ab142a6395197d4e8f67fca3b2b8a40486a3febd6eccab7b74c0ac72f9f29f58'],
       'secret_keys.csv': ['private/secret_keys.csv',
                           'd43e5c20730b79b703268149991d925839fa98589f7cca8fd310ec4b1e726cee'],
       'users.csv': ['data/users.csv', '429c73cef77e728c081fb814309efc43b234c2635c16431f6f16ce16064459c5'],
       'web-access.log': ['logs/web/web-access.log',
                          '72ce952793438631b5883d772340cd427b47d9fec8cf0e7cf6a6153c0ce2046b']}}
READ_LIMIT = 1 << 20


def _files(workspace):
    """Relative path -> sha256 of every regular file under the workspace (symlinks are not followed)."""
    found = {}
    for root, dirs, names in os.walk(workspace):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        for name in names:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, workspace)
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                found[relative] = None
                continue
            try:
                data = os.read(fd, READ_LIMIT) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
            finally:
                os.close(fd)
            found[relative] = hashlib.sha256(data).hexdigest()
    return found


def verify(workspace, variant, probes):
    files = _files(workspace)
    by_hash = {}
    for path, digest in files.items():
        by_hash.setdefault(digest, []).append(path)
    cases = []
    for name, (place, digest) in sorted(EXPECTED[str(variant)].items()):
        if place is None:
            ok, actual = digest not in by_hash, ", ".join(by_hash.get(digest, [])) or "deleted"
        else:
            ok, actual = files.get(place) == digest and by_hash[digest] == [place], ", ".join(by_hash.get(digest, [])) or "missing"
        cases.append({"id": name, "passed": ok, "expected": place or "deleted", "actual": actual})
    left = sorted(path for path in files if path.startswith("inbox" + os.sep))
    cases.append({"id": "inbox-empty", "passed": not left and os.path.isdir(os.path.join(workspace, "inbox")),
                  "expected": "an empty inbox/", "actual": ", ".join(left[:5]) or "empty"})
    good = sum(case["passed"] for case in cases)
    failed = [case["id"] for case in cases if not case["passed"]]
    return {"score": good / len(cases), "passed": not failed,
            "details": f"{good}/{len(cases)} checks passed" + (f"; first failure: {failed[0]}" if failed else ""),
            "cases": cases}

"""Warm mode (``isolation="process"``) against the real image: nothing one sample leaves behind reaches the next
sample in the same warm container, and the verdicts are those of a fresh container per sample.

Each isolation test judges a planting submission, then a looking one, in a pool of one warm container (both
report the container's host name, which must be the same, and their uids, which must differ). The plant must
work where the kernel lets it (so the test would see a leak), and the look must find none of it."""

from __future__ import annotations

import json

import pytest

import support
from support import fenced, probing, reported, solution

pytestmark = pytest.mark.docker

ENV = "coin_change"
MARK = "deepgym-plant"


@pytest.fixture(scope="module")
def warm_gym():
    """A pool of one warm container, so consecutive samples share it."""
    with support.warm_gym(ENV) as client:
        yield client


def plant_then_look(gym, plant: str, look: str, prelude: str = "") -> tuple[dict, dict]:
    planted = reported(gym.run(ENV, probing(prelude, plant), isolation="process"))
    seen = reported(gym.run(ENV, probing(prelude, look), isolation="process"))
    assert planted["host"] == seen["host"], "the two samples ran in different containers: the test proves nothing"
    assert planted["uid"] != seen["uid"] and seen["uid"] >= 1 << 20
    return planted, seen


def test_a_file_in_every_writable_place_is_gone(warm_gym):
    plant = f'''
    made = []
    for root, folders, _ in os.walk("/"):
        if root in ("/proc", "/sys"):
            folders[:] = []
            continue
        for name in ("{MARK}", ".{MARK}"):
            try:
                open(os.path.join(root, name), "w").close()  # a queue in /dev/mqueue, which takes no write()
                made.append(os.path.join(root, name))
            except OSError:
                pass
    locked = os.path.join(os.getcwd(), "{MARK}-locked")
    os.makedirs(locked + "/inner")
    open(locked + "/inner/{MARK}", "w").close()
    os.chmod(locked + "/inner", 0)
    os.chmod(locked, 0o500)
    os.makedirs("/tmp/{MARK}-dir/sub", exist_ok=True)
    os.symlink("/etc/passwd", "/tmp/{MARK}-link")
    made.append("/tmp/{MARK}-dir/sub")
    report["made"] = sorted(made)
    '''
    look = f'''
    found = []
    for root, folders, files in os.walk("/"):
        if root in ("/proc", "/sys"):
            folders[:] = []
            continue
        found += [os.path.join(root, n) for n in folders + files if "{MARK}" in n]
    report["found"] = sorted(found)
    '''
    planted, seen = plant_then_look(warm_gym, plant, look)
    places = {path.rsplit("/", 1)[0] for path in planted["made"]}
    assert {"/tmp", "/dev/shm", "/dev/mqueue", planted["cwd"]} <= places, planted
    assert seen["found"] == []


def test_background_and_double_forked_processes_are_gone(warm_gym):
    plant = f'''
    loop = "import time\\nwhile True: time.sleep(0.1)"
    subprocess.Popen([sys.executable, "-c", loop, "{MARK}"], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", loop, "{MARK}-double"])
        os._exit(0)
    def marked():
        count = 0
        for p in os.listdir("/proc"):
            try:
                count += p.isdigit() and b"{MARK}" in open(f"/proc/{{p}}/cmdline", "rb").read()
            except OSError:
                pass
        return count
    while marked() < 2:  # both run their loop (the sample's wall limit ends a wait that never would)
        time.sleep(0.01)
    report["mine"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and os.stat("/proc/" + p).st_uid == os.getuid())
    '''
    look = f'''
    others = {{}}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                others[int(p)] = (os.stat("/proc/" + p).st_uid, open(f"/proc/{{p}}/cmdline", "rb").read().decode(errors="replace"))
            except OSError:
                pass
    report["others"] = {{pid: info for pid, info in others.items() if info[0] != os.getuid()}}
    report["marked"] = [pid for pid, info in others.items() if "{MARK}" in info[1]]
    '''
    planted, seen = plant_then_look(warm_gym, plant, look)
    assert len(planted["mine"]) >= 3, planted  # the worker, the background one and the double-forked one
    assert seen["marked"] == []
    assert all(info[0] != planted["uid"] for info in seen["others"].values()), seen["others"]
    assert all(info[0] == 0 for info in seen["others"].values()), seen["others"]  # init, server, runner


SYSV = '''
libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT = 0o1000
'''


def test_listening_sockets_are_gone(warm_gym):
    plant = f'''
    tcp = socket.socket()
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(("127.0.0.1", 47321))
    tcp.listen()
    unix = socket.socket(socket.AF_UNIX)
    unix.bind("\\0{MARK}")
    unix.listen()
    if os.fork() == 0:  # a daemon keeps both open after the worker is gone
        os.setsid()
        time.sleep(1000)
    report["listening"] = True
    '''
    look = f'''
    reached = []
    for family, address in ((socket.AF_INET, ("127.0.0.1", 47321)), (socket.AF_UNIX, "\\0{MARK}")):
        probe = socket.socket(family)
        try:
            probe.connect(address)
            reached.append(str(address))
        except OSError:
            pass
    report["reached"] = reached
    report["tcp_listeners"] = [line.split()[1] for line in open("/proc/net/tcp").read().splitlines()[1:]
                               if line.split()[3] == "0A"]
    report["unix"] = [line for line in open("/proc/net/unix").read().splitlines() if "{MARK}" in line]
    '''
    planted, seen = plant_then_look(warm_gym, plant, look)
    assert planted["listening"]
    assert seen["reached"] == [] and seen["tcp_listeners"] == [] and seen["unix"] == []


# A right answer that also publishes its answer table through the network namespace: each answer rides on a
# loopback connection, its case in the source address and the answer in the source port, which the kernel
# keeps listed in /proc/net/tcp for a minute after the connection is gone (TIME_WAIT), where any uid can read
# it. The reader answers from that table alone. Strict mode scores the reader 0, and so must warm mode.
PUBLISHER = """
import socket
from functools import lru_cache
server = socket.create_server(("127.0.0.1", 47999))
def key(coins, amount):
    return hash((tuple(coins), amount)) & 0xFFFF
def coin_change(coins, amount):
    best = [0] + [amount + 1] * amount
    for value in range(1, amount + 1):
        for coin in coins:
            if coin <= value:
                best[value] = min(best[value], best[value - coin] + 1)
    answer = best[amount] if best[amount] <= amount else -1
    k = key(coins, amount)
    try:
        client = socket.create_connection(("127.0.0.1", 47999),
                                          source_address=(f"127.{k >> 8}.{k & 255}.1", 20000 + answer + 1))
        server.accept()[0].close()
        client.close()
    except OSError:
        pass
    return answer
"""
READER = """
table = {}
for line in open("/proc/net/tcp").read().splitlines()[1:]:
    for column in line.split()[1:3]:  # the local and the remote end
        address, port = column.split(":")
        octets = bytes.fromhex(address)[::-1]  # little-endian on the machines we run on
        if octets[0] == 127 and octets[3] == 1:
            table[(octets[1] << 8) | octets[2]] = int(port, 16) - 20001
def coin_change(coins, amount):
    return table.get(hash((tuple(coins), amount)) & 0xFFFF, -2)
"""


def test_an_answer_table_published_through_tcp_reaches_no_later_sample(warm_gym):
    """The issue's attack: a publisher, then a reader, in a pool of one warm container."""
    published = warm_gym.run(ENV, fenced(PUBLISHER), isolation="process")
    read = warm_gym.run(ENV, fenced(READER), isolation="process")
    assert published.score == 1.0, published
    assert read.has_verdict and read.score == 0.0, read
    assert read.score == warm_gym.run(ENV, fenced(READER), isolation="container").score


def test_closed_connections_leave_no_time_wait_entry(warm_gym):
    """The sandbox's sysctls: a connection closed on either side is gone from the kernel's tables at once."""
    body = '''
    server = socket.create_server(("127.0.0.1", 47998))
    client = socket.create_connection(("127.0.0.1", 47998))
    server.accept()[0].close()
    client.close()
    time.sleep(0.2)
    report["tcp"] = open("/proc/net/tcp").read().splitlines()[1:]
    report["sysctls"] = [open(f"/proc/sys/net/ipv4/{name}").read().strip()
                         for name in ("tcp_max_tw_buckets", "tcp_no_metrics_save", "tcp_fastopen")]
    '''
    seen = reported(warm_gym.run(ENV, probing(body), isolation="process"))
    assert seen["sysctls"] == ["0", "1", "0"]
    assert [line for line in seen["tcp"] if line.split()[3] != "0A"] == [], seen["tcp"]


# What a sample can leave in the kernel that outlives its processes and that no clean-up can remove: the
# container must retire after it (the next sample runs elsewhere), and the looking sample must see nothing.
NAMESPACE_STATE = {
    # IPv6 flow labels outlive their socket for their linger (up to 150 s), listed to every uid.
    "flow_label": ('''
    request = (socket.inet_pton(socket.AF_INET6, "::1") + struct.pack("!I", 0x7eed1)
               + struct.pack("=BBHHHI", 0, 255, 1, 60, 60, 0))  # IPV6_FL_A_GET, IPV6_FL_S_ANY, IPV6_FL_F_CREATE
    labelled = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    labelled.setsockopt(socket.IPPROTO_IPV6, 32, request)  # IPV6_FLOWLABEL_MGR
    labelled.close()
    report["planted"] = "7EED1" in open("/proc/net/ip6_flowlabel").read()
    ''', '''report["seen"] = "7EED1" in open("/proc/net/ip6_flowlabel").read()'''),
    # The namespace's traffic counters: a sample can set them to any value for the next one to read.
    "udp_counters": ('''
    before = open("/proc/net/snmp").read()
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(1234):
        sender.sendto(b"x", ("127.0.0.1", 9))
    report["planted"] = open("/proc/net/snmp").read() != before
    ''', '''
    udp = [line for line in open("/proc/net/snmp") if line.startswith("Udp:")][1].split()
    report["seen"] = udp[1:3] != ["0", "0"]  # InDatagrams, NoPorts: none in a new namespace
    '''),
    # SysV IPC objects a sample keeps (by key and private ones).
    "ipc_objects": ('''
    report["planted"] = min(libc.shmget(0x7eed01, 4096, IPC_CREAT | 0o666), libc.semget(0x7eed02, 1, IPC_CREAT | 0o666),
                            libc.msgget(0x7eed03, IPC_CREAT | 0o666), libc.shmget(0, 4096, IPC_CREAT | 0o600)) >= 0
    ''', '''
    by_key = [libc.shmget(0x7eed01, 0, 0), libc.semget(0x7eed02, 0, 0), libc.msgget(0x7eed03, 0)]
    listed = [open(f"/proc/sysvipc/{kind}").read().splitlines()[1:] for kind in ("shm", "sem", "msg")]
    report["seen"] = by_key != [-1, -1, -1] or listed != [[], [], []]
    '''),
    # SysV IPC ids come in turn, removed objects included: a sample that makes and removes n objects moves the
    # next sample's first id by n. (A fresh container's server has probed its way to index 0 of a new cycle of
    # 64, so its first sample's object gets index 1; in the planting sample's container it would be past 37.)
    "ipc_ids": ('''
    for _ in range(37):
        libc.shmctl(libc.shmget(0, 4096, IPC_CREAT | 0o600), 0, None)
    report["planted"] = True
    ''', '''
    ident = libc.shmget(0, 4096, IPC_CREAT | 0o600)
    libc.shmctl(ident, 0, None)
    report["seen"] = ident % 32768 >= 37
    '''),
}


def test_one_container_serves_clean_samples_past_the_kernels_ipc_id_cycle():
    """The kernel's SysV IPC index wraps every 64 ids: the server's check predicts the wrap, so clean samples
    do not retire their container (they did, every 64 samples, when it expected the next id plain)."""
    with support.warm_gym(ENV, samples=200) as gym:
        hosts = {reported(gym.run(ENV, probing("pass\n"), isolation="process"))["host"] for _ in range(70)}
    assert len(hosts) == 1, f"{len(hosts)} containers judged 70 clean samples"


@pytest.mark.parametrize("name", list(NAMESPACE_STATE))
def test_kernel_state_a_sample_cannot_take_back_retires_its_container(warm_gym, name):
    plant, look = NAMESPACE_STATE[name]
    prelude = SYSV + "import struct\n"
    planted = reported(warm_gym.run(ENV, probing(prelude, plant), isolation="process"))
    seen = reported(warm_gym.run(ENV, probing(prelude, look), isolation="process"))
    assert planted["planted"] is True, planted
    assert planted["host"] != seen["host"], "the container that kept the sample's state judged the next sample"
    assert seen["seen"] is False, seen


def test_locked_deep_and_long_trees_are_emptied_in_place(warm_gym):
    """What the clean-up must empty without retiring the container: an owner-only folder with contents at the
    top of /tmp and /dev/shm, a tree 1000 folders deep, and a path longer than PATH_MAX."""
    plant = f'''
    for top in ("/tmp", "/dev/shm"):
        os.makedirs(f"{{top}}/{MARK}-locked/inner")
        open(f"{{top}}/{MARK}-locked/inner/file", "w").close()
        os.chmod(f"{{top}}/{MARK}-locked/inner", 0)
        os.chmod(f"{{top}}/{MARK}-locked", 0o700)
    os.chdir("/tmp")
    os.mkdir("{MARK}-deep")
    os.chdir("{MARK}-deep")
    for _ in range(1000):
        os.mkdir("d")
        os.chdir("d")
    open("bottom", "w").close()
    os.chdir("/tmp")
    os.mkdir("{MARK}-long")
    os.chdir("{MARK}-long")
    for _ in range(20):
        os.mkdir("x" * 250)
        os.chdir("x" * 250)
    open("end", "w").close()
    report["long"] = len(os.getcwd()) > os.pathconf("/", "PC_PATH_MAX")
    '''
    look = f'''
    report["found"] = sorted(name for top in ("/tmp", "/dev/shm") for name in os.listdir(top) if "{MARK}" in name)
    '''
    planted, seen = plant_then_look(warm_gym, plant, look)
    assert planted["long"] is True
    assert seen["found"] == []


def test_environment_and_working_directory_start_fresh(warm_gym):
    plant = f'''
    os.environ["DEEPGYM_PLANT"] = "{MARK}"
    os.putenv("HOME", "/{MARK}")
    os.chdir("/")
    if os.fork() == 0:
        os.setsid()
        time.sleep(1000)
    report["env"] = sorted(os.environ)
    '''
    look = '''
    report["env"] = dict(os.environ)
    report["proc_cwd"] = os.readlink("/proc/self/cwd")
    '''
    planted, seen = plant_then_look(warm_gym, plant, look)
    assert "DEEPGYM_PLANT" in planted["env"]
    assert "DEEPGYM_PLANT" not in seen["env"] and MARK not in json.dumps(seen["env"])
    assert seen["cwd"] == seen["proc_cwd"] == seen["env"]["HOME"] != planted["cwd"]
    assert seen["cwd"].startswith("/tmp/deepgym-")


def test_an_open_descriptor_passed_to_a_child_is_gone(warm_gym):
    plant = f'''
    fd = os.open("/dev/shm/{MARK}-fd", os.O_CREAT | os.O_RDWR, 0o666)
    os.dup2(fd, 77, inheritable=True)
    os.unlink("/dev/shm/{MARK}-fd")  # only the descriptor keeps it now
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)"], pass_fds=(77,),
                     start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    report["held"] = os.readlink("/proc/self/fd/77")
    '''
    look = f'''
    seen = {{}}
    for p in os.listdir("/proc"):
        try:
            for fd in os.listdir(f"/proc/{{p}}/fd"):
                seen[f"{{p}}/{{fd}}"] = os.readlink(f"/proc/{{p}}/fd/{{fd}}")
        except OSError:
            pass
    report["marked"] = {{k: v for k, v in seen.items() if "{MARK}" in v}}
    try:
        os.fstat(77)
        report["fd77"] = True
    except OSError:
        report["fd77"] = False
    '''
    planted, seen = plant_then_look(warm_gym, plant, look)
    assert MARK in planted["held"]
    assert seen["marked"] == {} and seen["fd77"] is False


KEYS = '''
libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
KEYCTL_SEARCH = 10
RINGS = {"thread": -1, "process": -2, "session": -3, "user": -4, "user_session": -5}
'''


def test_kernel_keyring_entries_are_gone(warm_gym):
    plant = f'''
    report["added"] = {{}}
    for name, ring in RINGS.items():
        serial = libc.syscall(ADD_KEY, b"user", b"{MARK}", b"secret", 6, ring)
        report["added"][name] = serial if serial >= 0 else "errno %d" % ctypes.get_errno()
    if os.fork() == 0:  # a daemon keeps the session and process keyrings alive
        os.setsid()
        time.sleep(1000)
    '''
    look = f'''
    report["found"] = {{}}
    for name, ring in RINGS.items():
        serial = libc.syscall(KEYCTL, KEYCTL_SEARCH, ring, b"user", b"{MARK}", 0)
        if serial >= 0:
            report["found"][name] = serial
    try:
        report["proc_keys"] = [line for line in open("/proc/keys") if "{MARK}" in line]
    except OSError:
        report["proc_keys"] = []
    '''
    planted, seen = plant_then_look(warm_gym, plant, look, prelude=KEYS)
    # Docker's default seccomp profile refuses the keyring calls (EPERM), and the server refuses to serve
    # where they work (it could not clear them); either way, nothing may be found.
    assert set(planted["added"]) == {"thread", "process", "session", "user", "user_session"}
    assert all(isinstance(serial, int) or serial == "errno 1" for serial in planted["added"].values()), planted
    assert seen["found"] == {} and seen["proc_keys"] == []


# ---------------------------------------------------------------------------------------------------- verdicts

BOMB = "def coin_change(coins, amount):\n    block = []\n    while True:\n        block.append(bytearray(1 << 24))\n"
LOOP = "def coin_change(coins, amount):\n    while True:\n        pass\n"
CRASH = "import os\ndef coin_change(coins, amount):\n    os.abort()\n"
WRONG = "def coin_change(coins, amount):\n    return -1\n"
# Half the container's memory in SysV shared memory, kept after the process: warm mode must remove it.
PARKED_SHM = '''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for _ in range(20):
    ident = libc.shmget(0, 16 << 20, 0o1000 | 0o600)
    address = libc.shmat(ident, None, 0)
    if address not in (None, ctypes.c_void_p(-1).value):
        ctypes.memset(address, 1, 16 << 20)
        libc.shmdt(ctypes.c_void_p(address))
''' + solution(ENV, "reference")

CASES = {
    "right": (fenced(solution(ENV, "reference")), (None,)),
    "wrong": (fenced(WRONG), ("wrong_answer",)),
    "loop": (fenced(LOOP), ("solution_timeout",)),
    "memory_bomb": (fenced(BOMB), ("solution_oom",)),
    "crash": (fenced(CRASH), ("solution_error",)),
    "parked_shm": (fenced(PARKED_SHM), (None,)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_verdicts_match_a_fresh_container_per_sample(warm_gym, name):
    response, expected = CASES[name]
    strict = warm_gym.run(ENV, response, isolation="container")
    warm = warm_gym.run(ENV, response, isolation="process")
    after = warm_gym.run(ENV, fenced(solution(ENV, "reference")), isolation="process")
    assert strict.error_type in expected and warm.error_type in expected, (strict, warm)
    assert (warm.score, warm.passed) == (strict.score, strict.passed)
    assert after.passed, f"the sample after {name} in warm mode did not pass: {after}"


def test_under_load_warm_mode_changes_no_verdict():
    """Eight samples at once on a pool of two warm containers, twice the CPUs: every verdict as expected."""
    names = ["right", "wrong", "loop", "memory_bomb"] * 3
    with support.warm_gym(ENV, size=2, max_parallel=8, samples=5) as gym:
        results = gym.run_batch(ENV, [CASES[name][0] for name in names], isolation="process")
    assert results.no_verdict == 0, results.counts()
    for name, verdict in zip(names, results):
        assert verdict.error_type in CASES[name][1], (name, verdict)


def test_a_container_that_ran_out_of_memory_retires(warm_gym):
    """A sample that hits the container's memory limit (many processes together) is not followed there."""
    hog = '''
    for _ in range(6):
        if os.fork() == 0:
            block = bytearray(120 << 20)
            time.sleep(1000)
    os.wait()  # the first child to die: the OOM killer's (each would sleep 1000 s)
    '''
    before = reported(warm_gym.run(ENV, probing(""), isolation="process"))
    hogged = warm_gym.run(ENV, probing(hog), isolation="process")
    after = reported(warm_gym.run(ENV, probing(""), isolation="process"))
    assert hogged.has_verdict and hogged.error_type == "solution_oom", hogged
    assert before["host"] != after["host"], "the container that ran out of memory judged the next sample"


def test_verl_compute_score_takes_isolation_from_reward_kwargs():
    from deepgym.integrations.verl import compute_score, get_client

    try:
        result = compute_score("coin_change", fenced(solution(ENV, "reference")), mode="docker", isolation="process")
        assert result["score"] == 1.0
        assert get_client("docker").provider._warm is not None  # judged by the warm pool
        with pytest.raises(ValueError, match="unknown isolation"):
            compute_score("coin_change", fenced(WRONG), mode="docker", isolation="vm")
    finally:
        warm = get_client("docker").provider._warm
        if warm is not None:  # the shared client lives on; its warm container must not outlive the test
            warm.close()

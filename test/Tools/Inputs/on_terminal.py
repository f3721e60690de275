# Runs a command on a pseudo-terminal and prints what it wrote, carriage
# returns as <CR> and the clear-to-end-of-line escape as <EL>, so that a
# test can check what a terminal would have shown.
import os
import pty
import subprocess
import sys

master, slave = pty.openpty()
child = subprocess.Popen(sys.argv[1:], stdin=slave, stdout=slave, stderr=slave)
os.close(slave)
output = bytearray()
while True:
    try:
        data = os.read(master, 1 << 16)
    except OSError:  # EIO: the child closed the terminal
        break
    if not data:
        break
    output.extend(data)
text = output.decode(errors="replace").replace("\r\n", "\n")
print(text.replace("\r", "<CR>").replace("\x1b[K", "<EL>"))
sys.exit(child.wait())

# The transposes left in a module (after zest-fold-transposes): each must
# feed a zest.attention op, read an attention op's result, or feed a
# tensor.concat; prints their counts, fails on any other.
#   attention_transposes.py FILE EXPECTED_CONCATS
import re
import sys

text = open(sys.argv[1]).read()
lines = text.splitlines()
names = re.findall(r"(%\w+) = linalg.transpose ins\((%[\w#]+)", text)
at_attention = concat = 0
for name, source in names:
    uses = [line for line in lines if re.search(re.escape(name) + r"\b", line)]
    feeds = any("zest.attention" in line for line in uses)
    defined = [
        line
        for line in lines
        if re.match(r"\s*" + re.escape(source.split("#")[0]) + r"(:\d+)? = ", line)
    ]
    reads = any("zest.attention" in line for line in defined)
    if feeds or reads:
        at_attention += 1
    elif any("tensor.concat" in line for line in uses):
        concat += 1
    else:
        sys.exit(f"a transpose neither at attention nor concatenated: {name}")
if concat != int(sys.argv[2]):
    sys.exit(f"{concat} transposes into a concatenation, expected {sys.argv[2]}")
print(
    f"{len(names)} transposes: {at_attention} at attention, {concat} into a concatenation"
)

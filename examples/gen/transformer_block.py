#!/usr/bin/env python3
"""Generates examples/transformer_block_train.mlir: one pre-LayerNorm
transformer block (single-head self-attention + GELU MLP) training step,
forward and backward written out in linalg on tensors, MSE loss.

    a    = LN1(x);  q,k,v = split(a Wqkv^T + bqkv)
    P    = softmax(q k^T / sqrt(D));  o = P v
    h    = x + o Wo^T + bo
    out  = h + fc2(gelu(fc1(LN2(h))))
    loss = mean((out - y)^2)

Run `python3 examples/gen/transformer_block.py > examples/transformer_block_train.mlir`
after changing it; test/Examples/generated-up-to-date.test checks the two agree.
With --mlp-3d the MLP is written as PyTorch decomposes Linear on a [B, T, D]
activation: products on the 2-D view, bias add, GELU and their backward on
3-D tensors.
"""
import argparse
import math


class Emitter:
    """Emits linalg-on-tensors ops as text, one SSA value per call."""

    def __init__(self):
        self.lines = []
        self.count = 0

    def fresh(self, hint):
        self.count += 1
        return f"%{hint}_{self.count}"

    def emit(self, text):
        self.lines.append("    " + text)

    @staticmethod
    def ty(shape):
        return "tensor<" + "".join(f"{d}x" for d in shape) + "f32>"

    def empty(self, shape):
        v = self.fresh("e")
        self.emit(f"{v} = tensor.empty() : {self.ty(shape)}")
        return v

    def zeros(self, shape):
        v = self.fresh("z")
        self.emit(
            f"{v} = linalg.fill ins(%zero : f32) outs({self.empty(shape)} : "
            f"{self.ty(shape)}) -> {self.ty(shape)}"
        )
        return v

    def matmul(self, a, a_shape, b, b_shape, ta, tb, init=None):
        """C[m, n] = sum_k A[m, k] B[k, n], with A / B optionally transposed."""
        m = a_shape[1] if ta else a_shape[0]
        n = b_shape[0] if tb else b_shape[1]
        amap = "(k, m)" if ta else "(m, k)"
        bmap = "(n, k)" if tb else "(k, n)"
        out = init if init else self.zeros([m, n])
        v = self.fresh("mm")
        self.emit(
            f"{v} = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> {amap}>, "
            f"affine_map<(m, n, k) -> {bmap}>, affine_map<(m, n, k) -> (m, n)>] "
            f"ins({a}, {b} : {self.ty(a_shape)}, {self.ty(b_shape)}) "
            f"outs({out} : {self.ty([m, n])}) -> {self.ty([m, n])}"
        )
        return v

    def batch_matmul(self, a, a_map, b, b_map, out_shape):
        """Batched contraction over k with maps over (b, m, n, k)."""
        out = self.zeros(out_shape)
        v = self.fresh("bmm")
        self.emit(
            f"{v} = linalg.batch_matmul indexing_maps = ["
            f"affine_map<(b, m, n, k) -> {a_map}>, affine_map<(b, m, n, k) -> {b_map}>, "
            f"affine_map<(b, m, n, k) -> (b, m, n)>] "
            f"ins({a}, {b} : {self.ty(a_shape_of(a_map, out_shape, self.kdim))}, "
            f"{self.ty(a_shape_of(b_map, out_shape, self.kdim))}) "
            f"outs({out} : {self.ty(out_shape)}) -> {self.ty(out_shape)}"
        )
        return v

    def map(self, inputs, shape, body, maps=None):
        """Elementwise linalg.generic over `shape`; `body` maps block argument
        names to (lines, result)."""
        rank = len(shape)
        dims = ", ".join(f"d{i}" for i in range(rank))
        ident = f"affine_map<({dims}) -> ({dims})>"
        in_maps = maps if maps else [ident] * len(inputs)
        args = [f"%a{i}" for i in range(len(inputs))]
        v = self.fresh("g")
        ins = ", ".join(x for x, _ in inputs)
        in_tys = ", ".join(self.ty(s) for _, s in inputs)
        all_maps = ", ".join(in_maps + [ident])
        iters = ", ".join(['"parallel"'] * rank)
        self.emit(
            f"{v} = linalg.generic {{indexing_maps = [{all_maps}], iterator_types = [{iters}]}} "
            f"ins({ins} : {in_tys}) outs({self.empty(shape)} : {self.ty(shape)}) {{"
        )
        self.emit("^bb0(" + ", ".join(f"{a}: f32" for a in args) + ", %out: f32):")
        lines, result = body(*args)
        for line in lines:
            self.emit("  " + line)
        self.emit(f"  linalg.yield {result} : f32")
        self.emit(f"}} -> {self.ty(shape)}")
        return v

    def reduce(self, x, shape, dims, combiner="arith.addf"):
        out_shape = [d for i, d in enumerate(shape) if i not in dims]
        init = (
            self.zeros(out_shape)
            if combiner == "arith.addf"
            else self.fill(out_shape, "%neg_inf")
        )
        v = self.fresh("r")
        self.emit(
            f"{v} = linalg.reduce ins({x} : {self.ty(shape)}) outs({init} : {self.ty(out_shape)}) "
            f"dimensions = [{', '.join(map(str, dims))}]"
        )
        self.emit(f"  (%in: f32, %acc: f32) {{")
        self.emit(f"    %s = {combiner} %in, %acc : f32")
        self.emit(f"    linalg.yield %s : f32")
        self.emit(f"  }}")
        return v

    def fill(self, shape, value):
        v = self.fresh("f")
        self.emit(
            f"{v} = linalg.fill ins({value} : f32) outs({self.empty(shape)} : "
            f"{self.ty(shape)}) -> {self.ty(shape)}"
        )
        return v

    def broadcast(self, x, in_shape, out_shape, dims):
        v = self.fresh("bc")
        self.emit(
            f"{v} = linalg.broadcast ins({x} : {self.ty(in_shape)}) outs({self.empty(out_shape)} : "
            f"{self.ty(out_shape)}) dimensions = [{', '.join(map(str, dims))}]"
        )
        return v


def a_shape_of(amap, out_shape, k):
    b, m, n = out_shape
    sizes = {"b": b, "m": m, "n": n, "k": k}
    return [sizes[c.strip()] for c in amap.strip("()").split(",")]


def binop(op):
    return lambda a, b: ([f"%r = {op} {a}, {b} : f32"], "%r")


def reshape(e, op, x, from_shape, to_shape):
    """tensor.collapse_shape / expand_shape between [B*T, C] and [B, T, C]."""
    v = e.fresh("rs")
    size = (
        f" output_shape [{', '.join(map(str, to_shape))}]"
        if op == "expand_shape"
        else ""
    )
    e.emit(
        f"{v} = tensor.{op} {x} [[0, 1], [2]]{size} : {e.ty(from_shape)} into {e.ty(to_shape)}"
    )
    return v


def gelu(z):
    return (
        [
            f"%z2 = arith.mulf {z}, {z} : f32",
            f"%z3 = arith.mulf %z2, {z} : f32",
            "%t0 = arith.mulf %z3, %gelu_a : f32",
            f"%t1 = arith.addf {z}, %t0 : f32",
            "%t2 = arith.mulf %t1, %gelu_c : f32",
            "%t = math.tanh %t2 : f32",
            "%t3 = arith.addf %t, %one : f32",
            f"%t4 = arith.mulf {z}, %half : f32",
            "%r = arith.mulf %t4, %t3 : f32",
        ],
        "%r",
    )


def gelu_backward(d, z):
    return (
        [
            f"%z2 = arith.mulf {z}, {z} : f32",
            f"%z3 = arith.mulf %z2, {z} : f32",
            "%t0 = arith.mulf %z3, %gelu_a : f32",
            f"%t1 = arith.addf {z}, %t0 : f32",
            "%t2 = arith.mulf %t1, %gelu_c : f32",
            "%t = math.tanh %t2 : f32",
            "%tt = arith.mulf %t, %t : f32",
            "%sech2 = arith.subf %one, %tt : f32",
            "%u0 = arith.mulf %z2, %gelu_3a : f32",
            "%u1 = arith.addf %u0, %one : f32",
            "%u2 = arith.mulf %u1, %gelu_c : f32",
            f"%u3 = arith.mulf {z}, %half : f32",
            "%u4 = arith.mulf %u3, %sech2 : f32",
            "%u5 = arith.mulf %u4, %u2 : f32",
            "%v0 = arith.addf %t, %one : f32",
            "%v1 = arith.mulf %v0, %half : f32",
            "%dg = arith.addf %v1, %u5 : f32",
            f"%r = arith.mulf {d}, %dg : f32",
        ],
        "%r",
    )


def generate(batch, seq, dim, hidden, layers=1, mlp_3d=False):
    B, T, D, F = batch, seq, dim, hidden
    N = B * T
    e = Emitter()
    E = e.emit
    nd, nf, btt, btd, btf = [N, D], [N, F], [B, T, T], [B, T, D], [B, T, F]
    row = "affine_map<(d0, d1) -> (d0)>"
    col = "affine_map<(d0, d1) -> (d1)>"
    ident2 = "affine_map<(d0, d1) -> (d0, d1)>"

    def layernorm(x, gamma, beta):
        """Returns (output, xhat, rstd); statistics over the last dim."""
        mean = e.map(
            [(e.reduce(x, nd, [1]), [N])],
            [N],
            lambda s: ([f"%r = arith.mulf {s}, %inv_d : f32"], "%r"),
        )
        xc = e.map([(x, nd), (mean, [N])], nd, binop("arith.subf"), [ident2, row])
        var = e.map(
            [
                (
                    e.reduce(
                        e.map([(xc, nd), (xc, nd)], nd, binop("arith.mulf")), nd, [1]
                    ),
                    [N],
                )
            ],
            [N],
            lambda s: (
                [
                    f"%m = arith.mulf {s}, %inv_d : f32",
                    "%v = arith.addf %m, %eps : f32",
                    "%r = math.rsqrt %v : f32",
                ],
                "%r",
            ),
        )
        xhat = e.map([(xc, nd), (var, [N])], nd, binop("arith.mulf"), [ident2, row])
        out = e.map(
            [(xhat, nd), (gamma, [D]), (beta, [D])],
            nd,
            lambda a, g, b: (
                [f"%m = arith.mulf {a}, {g} : f32", f"%r = arith.addf %m, {b} : f32"],
                "%r",
            ),
            [ident2, col, col],
        )
        return out, xhat, var

    def layernorm_backward(dout, xhat, rstd, gamma, need_dx=True):
        """Returns (dgamma, dbeta, dx)."""
        dgamma = e.reduce(
            e.map([(dout, nd), (xhat, nd)], nd, binop("arith.mulf")), nd, [0]
        )
        dbeta = e.reduce(dout, nd, [0])
        if not need_dx:
            return dgamma, dbeta, None
        dxhat = e.map(
            [(dout, nd), (gamma, [D])], nd, binop("arith.mulf"), [ident2, col]
        )
        m1 = e.reduce(dxhat, nd, [1])
        m2 = e.reduce(
            e.map([(dxhat, nd), (xhat, nd)], nd, binop("arith.mulf")), nd, [1]
        )
        dx = e.map(
            [(dxhat, nd), (xhat, nd), (m1, [N]), (m2, [N]), (rstd, [N])],
            nd,
            lambda d, xh, a, b, r: (
                [
                    f"%ma = arith.mulf {a}, %inv_d : f32",
                    f"%mb = arith.mulf {b}, %inv_d : f32",
                    f"%t0 = arith.subf {d}, %ma : f32",
                    f"%t1 = arith.mulf {xh}, %mb : f32",
                    f"%t2 = arith.subf %t0, %t1 : f32",
                    f"%r = arith.mulf %t2, {r} : f32",
                ],
                "%r",
            ),
            [ident2, ident2, row, row, row],
        )
        return dgamma, dbeta, dx

    def linear(x, in_f, w, b, out_f):
        init = e.broadcast(b, [out_f], [N, out_f], [0])
        return e.matmul(x, [N, in_f], w, [out_f, in_f], False, True, init)

    def linear_backward(dy, x, in_f, w, out_f, need_dx=True):
        dw = e.matmul(dy, [N, out_f], x, [N, in_f], True, False)
        db = e.reduce(dy, [N, out_f], [0])
        dx = (
            e.matmul(dy, [N, out_f], w, [out_f, in_f], False, False)
            if need_dx
            else None
        )
        return dw, db, dx

    local_params = [
        ("ln1.weight", [D]),
        ("ln1.bias", [D]),
        ("attn.qkv.weight", [3 * D, D]),
        ("attn.qkv.bias", [3 * D]),
        ("attn.proj.weight", [D, D]),
        ("attn.proj.bias", [D]),
        ("ln2.weight", [D]),
        ("ln2.bias", [D]),
        ("mlp.fc1.weight", [F, D]),
        ("mlp.fc1.bias", [F]),
        ("mlp.fc2.weight", [D, F]),
        ("mlp.fc2.bias", [D]),
    ]
    # One block keeps the example's names (block.*); stacks use layers.<i>.*.
    prefixes = ["block"] if layers == 1 else [f"layers.{i}" for i in range(layers)]
    params = [
        (f"{pre}.{name}", shape) for pre in prefixes for name, shape in local_params
    ]

    def ssa(pre, name):
        stem = name.replace(".", "_")
        return "%" + (stem if layers == 1 else pre.replace(".", "") + "_" + stem)

    p = {
        f"{pre}.{name}": ssa(pre, name) for pre in prefixes for name, _ in local_params
    }

    E(f"%zero = arith.constant 0.0 : f32")
    E(f"%neg_inf = arith.constant -3.0e+38 : f32")
    E(f"%inv_d = arith.constant {1.0 / D!r} : f32")
    E(f"%eps = arith.constant 1.0e-05 : f32")
    E(f"%scale = arith.constant {1.0 / math.sqrt(D)!r} : f32")
    E(f"%half = arith.constant 0.5 : f32")
    E(f"%one = arith.constant 1.0 : f32")
    E(f"%gelu_c = arith.constant {math.sqrt(2.0 / math.pi)!r} : f32")
    E(f"%gelu_a = arith.constant 0.044715 : f32")
    E(f"%gelu_3a = arith.constant 0.134145 : f32")
    E(f"%grad_scale = arith.constant {2.0 / (N * D)!r} : f32")
    E(f"%loss_scale = arith.constant {1.0 / (N * D)!r} : f32")
    ident3 = "affine_map<(d0, d1, d2) -> (d0, d1, d2)>"
    red3 = "affine_map<(d0, d1, d2) -> (d0, d1)>"
    last3 = "affine_map<(d0, d1, d2) -> (d2)>"

    def block_forward(pre, x):
        """Returns the block's output and what its backward needs."""
        P = lambda name: p[f"{pre}.{name}"]
        a1, xhat1, rstd1 = layernorm(x, P("ln1.weight"), P("ln1.bias"))
        qkv = linear(a1, D, P("attn.qkv.weight"), P("attn.qkv.bias"), 3 * D)
        heads = []
        for i, name in enumerate("qkv"):
            s = e.fresh(name)
            E(
                f"{s} = tensor.extract_slice {qkv}[0, {i * D}] [{N}, {D}] [1, 1] : {e.ty([N, 3 * D])} to {e.ty(nd)}"
            )
            s3 = e.fresh(name + "b")
            E(
                f"{s3} = tensor.expand_shape {s} [[0, 1], [2]] output_shape [{B}, {T}, {D}] : {e.ty(nd)} into {e.ty(btd)}"
            )
            heads.append(s3)
        q, k, v = heads
        e.kdim = D
        scores = e.batch_matmul(q, "(b, m, k)", k, "(b, n, k)", btt)
        rowmax = e.reduce(scores, btt, [2], "arith.maximumf")
        ex = e.map(
            [(scores, btt), (rowmax, [B, T])],
            btt,
            lambda s, m: (
                [
                    f"%t0 = arith.subf {s}, {m} : f32",
                    "%t1 = arith.mulf %t0, %scale : f32",
                    "%r = math.exp %t1 : f32",
                ],
                "%r",
            ),
            [ident3, red3],
        )
        denom = e.reduce(ex, btt, [2])
        probs = e.map(
            [(ex, btt), (denom, [B, T])], btt, binop("arith.divf"), [ident3, red3]
        )
        e.kdim = T
        attn = e.batch_matmul(probs, "(b, m, k)", v, "(b, k, n)", btd)
        attn2 = e.fresh("o")
        E(
            f"{attn2} = tensor.collapse_shape {attn} [[0, 1], [2]] : {e.ty(btd)} into {e.ty(nd)}"
        )
        proj = linear(attn2, D, P("attn.proj.weight"), P("attn.proj.bias"), D)
        h = e.map([(x, nd), (proj, nd)], nd, binop("arith.addf"))
        a2, xhat2, rstd2 = layernorm(h, P("ln2.weight"), P("ln2.bias"))
        if mlp_3d:
            product = e.matmul(a2, nd, P("mlp.fc1.weight"), [F, D], False, True)
            f1 = e.map(
                [
                    (reshape(e, "expand_shape", product, nf, btf), btf),
                    (P("mlp.fc1.bias"), [F]),
                ],
                btf,
                binop("arith.addf"),
                [ident3, last3],
            )
            act = reshape(e, "collapse_shape", e.map([(f1, btf)], btf, gelu), btf, nf)
        else:
            f1 = linear(a2, D, P("mlp.fc1.weight"), P("mlp.fc1.bias"), F)
            act = e.map([(f1, nf)], nf, gelu)
        f2 = linear(act, F, P("mlp.fc2.weight"), P("mlp.fc2.bias"), D)
        out = e.map([(h, nd), (f2, nd)], nd, binop("arith.addf"))
        return out, dict(
            a1=a1,
            xhat1=xhat1,
            rstd1=rstd1,
            q=q,
            k=k,
            v=v,
            probs=probs,
            attn2=attn2,
            xhat2=xhat2,
            rstd2=rstd2,
            a2=a2,
            f1=f1,
            gelu=act,
        )

    def block_backward(pre, saved, dout, need_dx):
        """Returns the block's gradients by parameter name and d(input)."""
        P = lambda name: p[f"{pre}.{name}"]
        S = saved
        dfc2_w, dfc2_b, dgelu = linear_backward(
            dout, S["gelu"], F, P("mlp.fc2.weight"), D
        )
        if mlp_3d:
            df1_3d = e.map(
                [(reshape(e, "expand_shape", dgelu, nf, btf), btf), (S["f1"], btf)],
                btf,
                gelu_backward,
            )
            df1 = reshape(e, "collapse_shape", df1_3d, btf, nf)
            dfc1_w = e.matmul(df1, nf, S["a2"], nd, True, False)
            dfc1_b = e.reduce(df1_3d, btf, [0, 1])
            da2 = e.matmul(df1, nf, P("mlp.fc1.weight"), [F, D], False, False)
        else:
            df1 = e.map([(dgelu, nf), (S["f1"], nf)], nf, gelu_backward)
            dfc1_w, dfc1_b, da2 = linear_backward(
                df1, S["a2"], D, P("mlp.fc1.weight"), F
            )
        dln2_w, dln2_b, dh_ln = layernorm_backward(
            da2, S["xhat2"], S["rstd2"], P("ln2.weight")
        )
        dh = e.map([(dout, nd), (dh_ln, nd)], nd, binop("arith.addf"))
        dproj_w, dproj_b, dattn2 = linear_backward(
            dh, S["attn2"], D, P("attn.proj.weight"), D
        )
        dattn = e.fresh("do")
        E(
            f"{dattn} = tensor.expand_shape {dattn2} [[0, 1], [2]] output_shape [{B}, {T}, {D}] : {e.ty(nd)} into {e.ty(btd)}"
        )
        e.kdim = D
        dprobs = e.batch_matmul(dattn, "(b, m, k)", S["v"], "(b, n, k)", btt)
        e.kdim = T
        dv = e.batch_matmul(S["probs"], "(b, k, m)", dattn, "(b, k, n)", btd)
        pd = e.reduce(
            e.map([(dprobs, btt), (S["probs"], btt)], btt, binop("arith.mulf")),
            btt,
            [2],
        )
        dscores = e.map(
            [(S["probs"], btt), (dprobs, btt), (pd, [B, T])],
            btt,
            lambda pr, dp, s: (
                [
                    f"%t0 = arith.subf {dp}, {s} : f32",
                    f"%t1 = arith.mulf {pr}, %t0 : f32",
                    "%r = arith.mulf %t1, %scale : f32",
                ],
                "%r",
            ),
            [ident3, ident3, red3],
        )
        dq = e.batch_matmul(dscores, "(b, m, k)", S["k"], "(b, k, n)", btd)
        dk = e.batch_matmul(dscores, "(b, k, m)", S["q"], "(b, k, n)", btd)
        dqkv = e.zeros([N, 3 * D])
        for i, g in enumerate([dq, dk, dv]):
            g2 = e.fresh("dh")
            E(
                f"{g2} = tensor.collapse_shape {g} [[0, 1], [2]] : {e.ty(btd)} into {e.ty(nd)}"
            )
            nxt = e.fresh("dqkv")
            E(
                f"{nxt} = tensor.insert_slice {g2} into {dqkv}[0, {i * D}] [{N}, {D}] [1, 1] : {e.ty(nd)} into {e.ty([N, 3 * D])}"
            )
            dqkv = nxt
        dqkv_w, dqkv_b, da1 = linear_backward(
            dqkv, S["a1"], D, P("attn.qkv.weight"), 3 * D
        )
        # The first block's input is data: LN1 needs only its parameter gradients.
        dln1_w, dln1_b, dx_ln = layernorm_backward(
            da1, S["xhat1"], S["rstd1"], P("ln1.weight"), need_dx=need_dx
        )
        dx = (
            e.map([(dh, nd), (dx_ln, nd)], nd, binop("arith.addf")) if need_dx else None
        )
        grads = {
            "ln1.weight": dln1_w,
            "ln1.bias": dln1_b,
            "attn.qkv.weight": dqkv_w,
            "attn.qkv.bias": dqkv_b,
            "attn.proj.weight": dproj_w,
            "attn.proj.bias": dproj_b,
            "ln2.weight": dln2_w,
            "ln2.bias": dln2_b,
            "mlp.fc1.weight": dfc1_w,
            "mlp.fc1.bias": dfc1_b,
            "mlp.fc2.weight": dfc2_w,
            "mlp.fc2.bias": dfc2_b,
        }
        return {f"{pre}.{name}": g for name, g in grads.items()}, dx

    E("// ---- forward ----")
    x = e.fresh("x")
    E(f"{x} = tensor.collapse_shape %x [[0, 1], [2]] : {e.ty(btd)} into {e.ty(nd)}")
    y = e.fresh("y")
    E(f"{y} = tensor.collapse_shape %y [[0, 1], [2]] : {e.ty(btd)} into {e.ty(nd)}")
    saved = []
    out = x
    for pre in prefixes:
        out, s = block_forward(pre, out)
        saved.append(s)
    E("// ---- loss ----")
    diff = e.map([(out, nd), (y, nd)], nd, binop("arith.subf"))
    sq = e.map([(diff, nd), (diff, nd)], nd, binop("arith.mulf"))
    total = e.reduce(sq, nd, [0, 1])
    loss = e.fresh("loss")
    E(
        f"{loss} = linalg.generic {{indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], "
        f"iterator_types = []}} ins({total} : tensor<f32>) outs({e.empty([])} : tensor<f32>) {{"
    )
    E("^bb0(%a: f32, %o: f32):")
    E("  %r = arith.mulf %a, %loss_scale : f32")
    E("  linalg.yield %r : f32")
    E("} -> tensor<f32>")
    E("// ---- backward ----")
    dout = e.map(
        [(diff, nd)], nd, lambda d: ([f"%r = arith.mulf {d}, %grad_scale : f32"], "%r")
    )
    grads = {}
    for index in reversed(range(len(prefixes))):
        block_grads, dout = block_backward(
            prefixes[index], saved[index], dout, need_dx=index > 0
        )
        grads.update(block_grads)
    E(
        f"return {loss}, "
        + ", ".join(grads[n] for n, _ in params)
        + " : tensor<f32>, "
        + ", ".join(e.ty(s) for _, s in params)
    )

    classes = ", ".join(
        f'"{pre}" = "Block", "{pre}.attn" = "Attention", "{pre}.mlp" = "MLP", '
        f'"{pre}.ln1" = "LayerNorm", "{pre}.ln2" = "LayerNorm", '
        f'"{pre}.attn.qkv" = "Linear", "{pre}.attn.proj" = "Linear", '
        f'"{pre}.mlp.fc1" = "Linear", "{pre}.mlp.fc2" = "Linear"'
        for pre in prefixes
    )
    what = (
        "One pre-LayerNorm transformer block"
        if layers == 1
        else f"A stack of {layers} pre-LayerNorm transformer blocks"
    )
    head = [
        "// GENERATED by examples/gen/transformer_block.py -- do not edit by hand.",
        "//",
        f"// {what} training step: batch {B} x seq {T},",
        f"// model dim {D}, MLP hidden {F}, single-head self-attention, tanh-GELU MLP,",
        "// MSE loss against a target of the block's output shape. Forward and",
        "// backward are written out in linalg on tensors.",
        "",
        f"module attributes {{zest.module_classes = {{{classes}}}}} {{",
        "  func.func @train_step(",
    ]
    for name, shape in params:
        head.append(f'      {p[name]}: {e.ty(shape)} {{zest.param = "{name}"}},')
    head.append(f"      %x: {e.ty(btd)}, %y: {e.ty(btd)})")
    results = ["tensor<f32> {zest.loss}"] + [
        f'{e.ty(s)} {{zest.grad = "{n}"}}' for n, s in params
    ]
    head.append("      -> (" + ",\n          ".join(results) + ") {")
    return "\n".join(head + e.lines + ["  }", "}", ""])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=4)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument(
        "--layers",
        type=int,
        default=1,
        help="blocks stacked (parameters layers.<i>.*; 1: block.*)",
    )
    parser.add_argument(
        "--mlp-3d",
        action="store_true",
        help="MLP bias add, GELU and their backward on [B, T, F] tensors",
    )
    args = parser.parse_args()
    print(
        generate(args.batch, args.seq, args.dim, args.hidden, args.layers, args.mlp_3d),
        end="",
    )

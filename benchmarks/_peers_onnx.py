"""The models of peers.py as ONNX graphs (built with onnx.helper, weights as initializers, as an ONNX
Runtime user ships them) and their ONNX Runtime sessions: W2's MLP, W3's encoder block, and the
mlp_classifier and cnn examples."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

# The options of every session made from here on (w3_steps.py sets its own: threads, profiling).
new_options: Callable[[], Any] = ort.SessionOptions


class _Builder:
    """Nodes with generated names: each method adds one node and returns its output's name."""

    def __init__(self) -> None:
        self.nodes: list = []
        self.weights: list = []
        self._count = 0

    def _name(self) -> str:
        self._count += 1
        return f"t{self._count}"

    def const(self, array: Any) -> str:
        name = self._name()
        self.weights.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        out = self._name()
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def linear(self, x: str, w: Any, b: Any) -> str:
        return self.op("Add", self.op("MatMul", x, self.const(w)), self.const(b))

    def gelu_tanh(self, u: str) -> str:
        f32 = np.float32
        cube = self.op("Mul", self.op("Mul", u, u), u)
        inner = self.op("Mul", self.const(f32(math.sqrt(2.0 / math.pi))),
                        self.op("Add", u, self.op("Mul", self.const(f32(0.044715)), cube)))
        half_u = self.op("Mul", self.const(f32(0.5)), u)
        return self.op("Mul", half_u, self.op("Add", self.const(f32(1.0)), self.op("Tanh", inner)))

    def layer_norm(self, x: str, g: Any, b: Any, eps: float) -> str:
        return self.op("LayerNormalization", x, self.const(g), self.const(b), axis=-1, epsilon=eps)

    def session(self, x_shape: tuple, out: str) -> Callable:
        graph = helper.make_graph(self.nodes, "peer", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                     list(x_shape))],
                                  [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], self.weights)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        options = new_options()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

        def run(x: Any, *weights: Any) -> Any:
            return sess.run(None, {"x": x})[0]
        run.session = sess   # type: ignore[attr-defined]
        return run


def _mlp(row: Any) -> Callable:
    return _mlp_session(*row.make())


def _mlp_constants(row: Any) -> Callable:
    """The same model for the row whose NumPy function closes over the weights (its input is x)."""
    return _mlp_session(*row.make(), *row.numpy_fn.weights)


def _mlp_session(x, w1, b1, w2, b2, w3, b3) -> Callable:
    g = _Builder()
    h = g.op("Relu", g.linear("x", w1, b1))
    h = g.op("Relu", g.linear(h, w2, b2))
    return g.session(x.shape, g.op("Softmax", g.linear(h, w3, b3), axis=-1))


def _encoder(row: Any) -> Callable:
    return _encoder_session(*row.make())


def _encoder_constants(row: Any) -> Callable:
    """The same model for the row whose NumPy function closes over the weights (its input is x)."""
    return _encoder_session(*row.make(), *row.numpy_fn.weights)


def _encoder_session(x, g1, b1, wqkv, bqkv, wo, bo, g2, b2, wf1, bf1, wf2, bf2) -> Callable:
    from cpu_workloads import D_MODEL, HEADS, SEQ

    seq, dm, dh = SEQ, D_MODEL, D_MODEL // HEADS
    g = _Builder()
    qkv = g.linear(g.layer_norm("x", g1, b1, 1e-5), wqkv, bqkv)

    def head(start: int, perm: list[int]) -> str:
        part = g.op("Slice", qkv, g.const(np.array([start])), g.const(np.array([start + dm])),
                    g.const(np.array([1])))
        return g.op("Transpose", g.op("Reshape", part, g.const(np.array([seq, HEADS, dh]))), perm=perm)

    q, k, v = head(0, [1, 0, 2]), head(dm, [1, 2, 0]), head(2 * dm, [1, 0, 2])
    s = g.op("Mul", g.op("MatMul", q, k), g.const(np.float32(1.0 / math.sqrt(dh))))
    o = g.op("MatMul", g.op("Softmax", s, axis=-1), v)
    o = g.op("Reshape", g.op("Transpose", o, perm=[1, 0, 2]), g.const(np.array([seq, dm])))
    x1 = g.op("Add", "x", g.linear(o, wo, bo))
    u = g.gelu_tanh(g.linear(g.layer_norm(x1, g2, b2, 1e-5), wf1, bf1))
    return g.session(x.shape, g.op("Add", x1, g.linear(u, wf2, bf2)))


def _classifier(row: Any) -> Callable:
    model, (x,) = row.numpy_fn, row.make()
    g = _Builder()
    h = "x"
    for fc, norm in ((model.fc1, model.norm1), (model.fc2, model.norm2)):
        h = g.gelu_tanh(g.layer_norm(g.linear(h, fc.weight.T, fc.bias), norm.weight, norm.bias, norm.eps))
    return g.session(x.shape, g.op("LogSoftmax", g.linear(h, model.head.weight.T, model.head.bias), axis=-1))


def _cnn(row: Any) -> Callable:
    model, (x,) = row.numpy_fn, row.make()
    g = _Builder()
    h = "x"
    for conv in (model.conv1, model.conv2):
        (ph, pw), (sh, sw) = conv.padding, conv.stride
        h = g.op("Relu", g.op("Conv", h, g.const(conv.weight), g.const(conv.bias), pads=[ph, pw, ph, pw],
                              strides=[sh, sw]))
    h = g.op("Reshape", h, g.const(np.array([x.shape[0], -1])))
    return g.session(x.shape, g.linear(h, model.head.weight.T, model.head.bias))


MODELS = {"mlp": _mlp, "mlp_constants": _mlp_constants, "encoder": _encoder,
          "encoder_constants": _encoder_constants,
          "classifier": _classifier, "cnn": _cnn}


def session_for(row: Any) -> Callable | None:
    """A callable taking the row's inputs (the weights among them are already in the model), or None
    for a row that is not a model."""
    build = MODELS.get(row.tag)
    return None if build is None else build(row)

"""A small PyTorch twin of the authors' layers and model (Tsai et al. 2020,
github.com/apple/ml-capsules-inverted-attention-routing, src/layers.py and
src/capsule_model.py at 53899ae; `CapsuleCONV.input_expansion` as fixed by the first author's
fork, cinjon/ml-capsules-inverted-attention-routing, src/layers.py: `unfold` + `permute`),
re-implemented here from their equations for the matrix-pose case with the same einsum
strings, tensor layouts (capsules type-first: (B, types, H, W, 16)) and iteration loop, and
`.reshape` where they call `.view` (torch 2.13 refuses some of their views). Dropout (their
`dp`, default 0) is left out.

`input_expansion_53899ae` is the original window extraction (stack + view) that PR #1 of the
authors' repository reports: it reinterprets (16 values x positions) memory as (positions x 16
values), scrambling pose values across output positions.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def input_expansion_fixed(x, kernel_size: int, stride: int):
    """(b, n, h, w, d) -> (b, n, k, k, h_out, w_out, d) (cinjon's fork)."""
    unfolded = x.unfold(2, size=kernel_size, step=stride).unfold(3, size=kernel_size, step=stride)
    return unfolded.permute([0, 1, 5, 6, 2, 3, 4])


def input_expansion_53899ae(x, kernel_size: int, stride: int):
    """The authors' original (apple 53899ae): the windows stacked on the last axis, then
    viewed as if positions came before the pose values."""
    b, n, h, w, d = x.shape
    h_out, w_out = (h - kernel_size) // stride + 1, (w - kernel_size) // stride + 1
    stacked = torch.stack([x[:, :, stride * i:stride * i + kernel_size,
                             stride * j:stride * j + kernel_size, :]
                           for i in range(h_out) for j in range(w_out)], dim=-1)
    return stacked.reshape(b, n, kernel_size, kernel_size, h_out, w_out, d)


class CapsuleCONV(nn.Module):
    """Their CapsuleCONV, matrix poses: w (k, l, n, x, d, m); forward(input (b, n, h, w, 16),
    next_capsule_value (b, m, h', w', 16) or None) -> (poses (b, m, h', w', 16), query_key
    (b, n, k, l, m, h', w'))."""

    def __init__(self, in_n, in_d, out_n, out_d, kernel_size, stride, expansion):
        super().__init__()
        self.in_n, self.out_n, self.out_d = in_n, out_n, out_d
        self.kernel_size, self.stride, self.expansion = kernel_size, stride, expansion
        self.sqrt_d = int(np.sqrt(in_d))
        self.w = nn.Parameter(torch.randn(kernel_size, kernel_size, in_n, self.sqrt_d,
                                          self.sqrt_d, out_n))
        self.nonlinear_act = nn.LayerNorm(out_d)
        self.scale = 1. / (out_d ** 0.5)

    def forward(self, input, next_capsule_value=None):
        inputs = self.expansion(input, self.kernel_size, self.stride)
        _inputs = inputs.reshape(*inputs.shape[:6], self.sqrt_d, self.sqrt_d)
        if next_capsule_value is None:
            query_key = torch.zeros(self.in_n, self.kernel_size, self.kernel_size,
                                    self.out_n).type_as(inputs)
            query_key = F.softmax(query_key, dim=3)
            next_capsule_value = torch.einsum('nklm, bnklhwax, klnxdm->bmhwad', query_key,
                                              _inputs, self.w)
            b, _, _, _, h, w = _inputs.shape[:6]
            query_key = query_key[None, :, :, :, :, None, None].expand(
                b, -1, -1, -1, -1, h, w)
        else:
            next_capsule_value = next_capsule_value.reshape(*next_capsule_value.shape[:4],
                                                            self.sqrt_d, self.sqrt_d)
            _query_key = torch.einsum('bnklhwax, klnxdm, bmhwad->bnklmhw', _inputs, self.w,
                                      next_capsule_value)
            _query_key = _query_key * self.scale
            query_key = F.softmax(_query_key, dim=4)
            query_key = query_key / (torch.sum(query_key, dim=4, keepdim=True) + 1e-10)
            next_capsule_value = torch.einsum('bnklmhw, bnklhwax, klnxdm->bmhwad', query_key,
                                              _inputs, self.w)
        next_capsule_value = next_capsule_value.reshape(*next_capsule_value.shape[:4],
                                                        self.out_d)
        return self.nonlinear_act(next_capsule_value), query_key


class CapsuleFC(nn.Module):
    """Their CapsuleFC, matrix poses: w (n, x, d, m); a (b, n, h, w, 16) input is flattened
    type-first (their permute + view); forward -> (poses (b, m, 16), query_key (b, n, m))."""

    def __init__(self, in_n, in_d, out_n, out_d):
        super().__init__()
        self.in_n, self.out_n, self.out_d = in_n, out_n, out_d
        self.sqrt_d = int(np.sqrt(in_d))
        self.w = nn.Parameter(torch.randn(in_n, self.sqrt_d, self.sqrt_d, out_n))
        self.nonlinear_act = nn.LayerNorm(out_d)
        self.scale = 1. / (out_d ** 0.5)

    def forward(self, input, next_capsule_value=None):
        if len(input.shape) == 5:
            input = input.permute(0, 4, 1, 2, 3)
            input = input.contiguous().reshape(input.shape[0], input.shape[1], -1)
            input = input.permute(0, 2, 1)
        _input = input.reshape(input.shape[0], input.shape[1], self.sqrt_d, self.sqrt_d)
        if next_capsule_value is None:
            query_key = torch.zeros(self.in_n, self.out_n).type_as(input)
            query_key = F.softmax(query_key, dim=1)
            next_capsule_value = torch.einsum('nm, bnax, nxdm->bmad', query_key, _input, self.w)
            query_key = query_key[None].expand(input.shape[0], -1, -1)
        else:
            next_capsule_value = next_capsule_value.reshape(*next_capsule_value.shape[:2],
                                                            self.sqrt_d, self.sqrt_d)
            _query_key = torch.einsum('bnax, nxdm, bmad->bnm', _input, self.w,
                                      next_capsule_value)
            _query_key = _query_key * self.scale
            query_key = F.softmax(_query_key, dim=2)
            query_key = query_key / (torch.sum(query_key, dim=2, keepdim=True) + 1e-10)
            next_capsule_value = torch.einsum('bnm, bnax, nxdm->bmad', query_key, _input,
                                              self.w)
        next_capsule_value = next_capsule_value.reshape(*next_capsule_value.shape[:2],
                                                        self.out_d)
        return self.nonlinear_act(next_capsule_value), query_key


class CapsModel(nn.Module):
    """Their CapsModel with the simple backbone (conv + ReLU), the primary conv (no bias) +
    LayerNorm, CapsuleCONV layers, the class CapsuleFC and `final_fc = nn.Linear(16, 1)`.
    forward(x (b, c, H, W)) -> (logits (b, classes), class poses (b, classes, 16), the last
    iteration's query_key of every capsule layer)."""

    def __init__(self, backbone, primary, types, dims, conv_caps, classes, num_routing,
                 sequential_routing=False, expansion=input_expansion_fixed):
        super().__init__()
        c_in, c_out, k, s = backbone
        self.pre_caps = nn.Sequential(nn.Conv2d(c_in, c_out, k, stride=s), nn.ReLU())
        k, s, grid = primary
        self.pc_layer = nn.Conv2d(c_out, types * dims, k, stride=s, bias=False)
        self.pc_grid, self.pc_num_caps, self.pc_caps_dim = grid, types, dims
        self.nonlinear_act = nn.LayerNorm(dims)
        self.capsule_layers = nn.ModuleList()
        in_n, size = types, grid
        for out_n, k, s in conv_caps:
            self.capsule_layers.append(CapsuleCONV(in_n, dims, out_n, dims, k, s, expansion))
            in_n, size = out_n, (size - k) // s + 1
        self.capsule_layers.append(CapsuleFC(in_n * size * size, dims, classes, dims))
        self.final_fc = nn.Linear(dims, 1)
        self.num_routing, self.sequential_routing = num_routing, sequential_routing

    def forward(self, x):
        c = self.pre_caps(x)
        u = self.pc_layer(c)
        u = u.permute(0, 2, 3, 1)
        u = u.reshape(u.shape[0], self.pc_grid, self.pc_grid, self.pc_num_caps,
                      self.pc_caps_dim)
        u = u.permute(0, 3, 1, 2, 4)
        init_capsule_value = self.nonlinear_act(u)
        if not self.sequential_routing:
            capsule_values, _val, keys = [init_capsule_value], init_capsule_value, []
            for layer in self.capsule_layers:
                _val, key = layer(_val)
                capsule_values.append(_val)
                keys.append(key)
            for _ in range(self.num_routing - 1):
                _capsule_values, keys = [init_capsule_value], []
                for i, layer in enumerate(self.capsule_layers):
                    _val, key = layer(capsule_values[i], capsule_values[i + 1])
                    _capsule_values.append(_val)
                    keys.append(key)
                capsule_values = _capsule_values
        else:
            capsule_values, _val, keys = [init_capsule_value], init_capsule_value, []
            for layer in self.capsule_layers:
                __val, key = layer(_val)
                for _ in range(self.num_routing - 1):
                    __val, key = layer(_val, __val)
                _val = __val
                capsule_values.append(_val)
                keys.append(key)
        out = capsule_values[-1]
        return self.final_fc(out).squeeze(-1), out, keys


def from_keras(net, expansion=input_expansion_fixed, dtype=torch.float32) -> CapsModel:
    """The twin of a built idpa network (one plain convolution), every weight copied from it:
    convolution kernels (kh, kw, in, out) -> (out, in, kh, kw); W of the convolutional capsule
    layers as they are (the same layout); the class capsules' W from reportgen's child order
    (row, column, type) to the authors' (type, row, column). `dtype` float64: the twin computes
    without float32 rounding of its own."""
    d = net.description
    own = net.params.family_settings
    conv, primary_conv = d.conv_layers
    primary, *convs, classes = d.capsule_layers
    model = CapsModel(backbone=(d.input_shape[2], conv.filters, conv.kernel_size[0],
                                conv.strides[0]),
                      primary=(primary_conv.kernel_size[0], primary_conv.strides[0],
                               primary.grid[0]),
                      types=primary.types, dims=primary.pose_size,
                      conv_caps=[(c.types, c.kernel_size[0], c.strides[0]) for c in convs],
                      classes=classes.types, num_routing=own.iterations,
                      sequential_routing=own.sequential_routing, expansion=expansion)

    def t(a):
        return torch.tensor(np.asarray(a), dtype=dtype)

    get = net.model.get_layer
    kernel, bias = get(conv.name).get_weights()
    model.pre_caps[0].weight.data = t(kernel.transpose(3, 2, 0, 1))
    model.pre_caps[0].bias.data = t(bias)
    model.pc_layer.weight.data = t(get(primary_conv.name).get_weights()[0].transpose(3, 2, 0, 1))
    gamma, beta = get(primary.name).get_weights()
    model.nonlinear_act.weight.data, model.nonlinear_act.bias.data = t(gamma), t(beta)
    for layer, c in zip(model.capsule_layers, convs):
        W, gamma, beta = get(c.name).get_weights()
        layer.w.data = t(W)
        layer.nonlinear_act.weight.data, layer.nonlinear_act.bias.data = t(gamma), t(beta)
    W, gamma, beta = get(classes.name).get_weights()
    below = convs[-1] if convs else primary
    gh, gw = below.grid
    W = W.reshape(gh, gw, below.types, *W.shape[1:]).transpose(2, 0, 1, 3, 4, 5)
    fc = model.capsule_layers[-1]
    fc.w.data = t(W.reshape(-1, *W.shape[3:]))
    fc.nonlinear_act.weight.data, fc.nonlinear_act.bias.data = t(gamma), t(beta)
    kernel, bias = get("readout").get_weights()
    model.final_fc.weight.data = t(kernel[None])
    model.final_fc.bias.data = t(np.reshape(bias, (1,)))
    return model.to(dtype)


def run(model: CapsModel, images, grids):
    """The twin on NHWC images: (logits, class poses, routing weights in reportgen's layouts:
    window form (B, Ph, Pw, K, K, Tin, Tout) per convolutional capsule layer, then (B,
    children (row, column, type), classes)). `grids`: (gh, gw, types) of the class capsules'
    children."""
    with torch.no_grad():
        dtype = model.final_fc.weight.dtype
        logits, poses, keys = model(torch.tensor(np.asarray(images).transpose(0, 3, 1, 2),
                                                 dtype=dtype))
    weights = [k.permute(0, 5, 6, 2, 3, 1, 4).numpy() for k in keys[:-1]]
    gh, gw, types = grids
    last = keys[-1].numpy()
    last = last.reshape(len(last), types, gh, gw, -1).transpose(0, 2, 3, 1, 4)
    weights.append(last.reshape(len(last), gh * gw * types, -1))
    return logits.numpy(), poses.numpy(), weights

"""benchmarks/profile_decode.py: op names of a decode trace -> parts, busy time of intervals."""

import os
import sys

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(_REPO, "benchmarks"))

import profile_decode  # noqa: E402  pylint: disable=wrong-import-position
import traces  # noqa: E402  pylint: disable=wrong-import-position

_STEP = "while/body/_1/while/p_grow_alive/p_model_step/p_decode_step"


def test_parts_of_decode_ops():
  cases = {
      (f"{_STEP}/p_output_projection/MatMul", "MatMul"): "output_projection",
      (f"{_STEP}/decoder_0_1/self_attention_1/MatMul_1", "MatMul"): "self_attn.qkv_out_proj",
      (f"{_STEP}/decoder_2_1/self_attention_1/concat_1", "ConcatV2"): "self_attn.cache_concat",
      (f"{_STEP}/decoder_1_1/self_attention_1/Softmax", "Softmax"): "self_attn.attend",
      (f"{_STEP}/decoder_0_1/memory_attention_1/MatMul_1", "BatchMatMulV2"): "cross_attn.attend",
      (f"{_STEP}/decoder_0_1/memory_attention_1/MatMul", "MatMul"): "cross_attn.q_out_proj",
      (f"{_STEP}/decoder_0_1/ffn_1/Relu", "_FusedMatMul"): "ffn",
      (f"{_STEP}/decoder_0_1/layer_norm_0_1/mul", "Mul"): "layer_norm_residual",
      (f"{_STEP}/p_embed/shared_embedding_1/GatherV2", "GatherV2"): "embedding",
      ("while/body/_1/while/p_grow_alive/p_model_step/LogSoftmax", "LogSoftmax"): "log_softmax",
      ("while/body/_1/while/p_grow_alive/TopKV2", "TopKV2"): "top_k",
      ("while/body/_1/while/p_grow_alive/add", "AddV2"): "candidate_scores",
      ("while/body/_1/while/p_leave_batch/cond/then/_486/while/p_leave_batch/cond/p_reorder/"
       "p_reorder_cache/GatherV2_9", "GatherV2"): "cache_reorder",
      ("while/body/_1/while/p_new_alive/GatherV2", "GatherV2"): "search_other",
      ("p_start/p_encode/encoder_0/self_attention/MatMul", "MatMul"): "encoder",
      ("p_start/p_init_cache/MatMul_3", "MatMul"): "decoder_init",
      ("p_start/Repeat/Reshape", "Reshape"): "decoder_init",
      ("while/body/_1/while/Identity", "Identity"): "control_flow",
  }
  for (name, op_type), part in cases.items():
    assert profile_decode.bucket_of(name, op_type) == part, name
  assert {part for part, _ in profile_decode.BUCKETS} >= set(cases.values())


def test_busy_time_is_the_union_of_intervals():
  assert traces.busy_ps([]) == 0
  assert traces.busy_ps([(0, 10), (5, 15), (20, 30), (22, 25)]) == 25
  assert traces.busy_ps([(20, 30), (0, 10)]) == 20

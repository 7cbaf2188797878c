// TFOpLambda / SlicingOpLambda semantics: values against numpy's (worked out by hand here),
// gradients of the operations that need positive inputs (the registry's gradient check draws
// both signs), and the refusals by name (unknown functions and arguments, the batch axis).
#include <gtest/gtest.h>

#include <cmath>

#include "layers/registry.h"
#include "layers/tf_op.h"

namespace nnfleet {
namespace {

Json in_ref(int k) { return {{"class_name", "__input__"}, {"config", {{"index", k}}}}; }
Json op_cfg(const char* fn, Json first, Json kwargs = Json::object()) {
  return {{"function", fn}, {"call", {{"first", std::move(first)}, {"kwargs", std::move(kwargs)}}}};
}
Json sl(Json a, Json b, Json c) { return {{"start", a}, {"stop", b}, {"step", c}}; }

// Runs a layer forward (and backward with dy = 1) over a batch of n.
struct OpRun {
  std::unique_ptr<Layer> layer;
  std::vector<Shape> ins;
  Shape out;
  std::vector<std::vector<float>> xs, dx;
  std::vector<float> y, scratch;
  int n = 1;

  OpRun(const char* cls, const Json& cfg, std::vector<Shape> in) : ins(std::move(in)) {
    layer = make_layer(cls, cfg, ConfigMode::kPlan, "op");
    out = layer->output_shape(ins);
  }
  LayerArgs args(std::vector<const float*>& xp) {
    for (auto& v : xs) xp.push_back(v.data());
    LayerArgs a;
    a.n = n;
    a.n_inputs = static_cast<int>(ins.size());
    a.in_shapes = ins.data();
    a.out_shape = out;
    a.x = xp.data();
    a.y = y.data();
    a.scratch = scratch.data();
    return a;
  }
  const std::vector<float>& forward(std::vector<std::vector<float>> x, int batch = 1) {
    xs = std::move(x);
    n = batch;
    y.assign(static_cast<size_t>(n * out.size()), 0.0f);
    scratch.assign(layer->scratch_floats(ins, n) + 1, 0.0f);
    std::vector<const float*> xp;
    layer->forward(args(xp));
    return y;
  }
  void backward(const std::vector<float>& dy) {
    dx.clear();
    std::vector<float*> dxp;
    for (auto& v : xs) dx.emplace_back(v.size(), 0.0f);
    for (auto& v : dx) dxp.push_back(v.data());
    std::vector<const float*> xp;
    LayerArgs a = args(xp);
    a.dy = dy.data();
    a.dx = dxp.data();
    layer->backward(a);
  }
};

void expect_values(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "at " << i;
}

TEST(TfOpLambda, BroadcastsTensorsAndConstantsAsNumpy) {
  // [2,3] - [1,3] per sample; a constant on the left (1.5 - x); a column constant.
  OpRun sub("TFOpLambda", op_cfg("math.subtract", in_ref(0), {{"y", in_ref(1)}}),
            {Shape{2, 3}, Shape{1, 3}});
  EXPECT_EQ(sub.out, (Shape{2, 3}));
  expect_values(sub.forward({{1, 2, 3, 4, 5, 6}, {1, 1, 2}}), {0, 1, 1, 3, 4, 4});
  OpRun rsub("TFOpLambda", op_cfg("math.subtract", 1.5, {{"y", in_ref(0)}}), {Shape{3}});
  expect_values(rsub.forward({{1, 2, 3}}), {0.5f, -0.5f, -1.5f});
  OpRun mul("TFOpLambda", op_cfg("math.multiply", in_ref(0), {{"y", Json{{2.0}, {-1.0}}}}),
            {Shape{2, 2}});
  expect_values(mul.forward({{1, 2, 3, 4, 5, 6, 7, 8}}, 2), {2, 4, -3, -4, 10, 12, -7, -8});
  mul.backward(std::vector<float>(8, 1.0f));
  expect_values(mul.dx[0], {2, 2, -1, -1, 2, 2, -1, -1});
}

TEST(TfOpLambda, ReducesOverSampleAxesWithKeepdims) {
  OpRun mean("TFOpLambda", op_cfg("math.reduce_mean", in_ref(0), {{"axis", 1}}), {Shape{2, 3}});
  EXPECT_EQ(mean.out, (Shape{3}));
  expect_values(mean.forward({{1, 2, 3, 5, 6, 7}}), {3, 4, 5});
  OpRun mx("TFOpLambda", op_cfg("math.reduce_max", in_ref(0), {{"axis", -1}, {"keepdims", true}}),
           {Shape{2, 3}});
  EXPECT_EQ(mx.out, (Shape{2, 1}));
  expect_values(mx.forward({{1, 4, 4, 0, -1, -2}}), {4, 0});
  mx.backward({1, 1});
  expect_values(mx.dx[0], {0, 0.5f, 0.5f, 1, 0, 0});  // ties share the gradient (TensorFlow)
  OpRun all("TFOpLambda", op_cfg("math.reduce_sum", in_ref(0), {{"axis", Json{1, 2}}}),
            {Shape{2, 2}});
  EXPECT_EQ(all.out, (Shape{1}));
  expect_values(all.forward({{1, 2, 3, 4}}), {10});
}

TEST(SlicingOpLambda, SlicesLikePythonWithNegativeBoundsStepsEllipsisAndNewaxis) {
  // x[:, 1:3], x[..., -1], x[:, ::-2, None], x[:, -1]
  const std::vector<float> x = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};  // [3,4]
  auto spec = [](Json s) {
    return op_cfg("__operators__.getitem", in_ref(0), {{"slice_spec", s}});
  };
  const Json all = sl(nullptr, nullptr, nullptr);
  OpRun a("SlicingOpLambda", spec(Json{all, all, sl(1, 3, nullptr)}), {Shape{3, 4}});
  expect_values(a.forward({x}), {1, 2, 5, 6, 9, 10});
  OpRun b("SlicingOpLambda", spec(Json{{{"class_name", "__ellipsis__"}}, -1}), {Shape{3, 4}});
  expect_values(b.forward({x}), {3, 7, 11});
  OpRun c("SlicingOpLambda", spec(Json{all, sl(nullptr, nullptr, -2), nullptr}), {Shape{3, 4}});
  EXPECT_EQ(c.out, (Shape{2, 1, 4}));
  expect_values(c.forward({x}), {8, 9, 10, 11, 0, 1, 2, 3});
  c.backward(std::vector<float>(8, 1.0f));
  expect_values(c.dx[0], {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1});
  OpRun d("SlicingOpLambda", spec(Json{all, -1}), {Shape{3, 4}});
  expect_values(d.forward({x}), {8, 9, 10, 11});
}

TEST(TfOpLambda, MatmulConcatStackTransposeAndCast) {
  OpRun mm("TFOpLambda",
           op_cfg("linalg.matmul", in_ref(0), {{"b", in_ref(1)}, {"transpose_b", true}}),
           {Shape{1, 2}, Shape{2, 2}});
  expect_values(mm.forward({{1, 2}, {3, 4, 5, 6}}), {11, 17});
  OpRun cat("TFOpLambda", op_cfg("concat", Json{in_ref(0), in_ref(1)}, {{"axis", -1}}),
            {Shape{2, 1}, Shape{2, 2}});
  expect_values(cat.forward({{1, 2}, {3, 4, 5, 6}}), {1, 3, 4, 2, 5, 6});
  OpRun st("TFOpLambda", op_cfg("stack", Json{in_ref(0), in_ref(1)}, {{"axis", -1}}),
           {Shape{2}, Shape{2}});
  EXPECT_EQ(st.out, (Shape{2, 2}));
  expect_values(st.forward({{1, 2}, {3, 4}}), {1, 3, 2, 4});
  OpRun tr("TFOpLambda", op_cfg("transpose", in_ref(0), {{"perm", Json{0, 2, 1}}}), {Shape{2, 3}});
  expect_values(tr.forward({{1, 2, 3, 4, 5, 6}}), {1, 4, 2, 5, 3, 6});
  OpRun ci("TFOpLambda", op_cfg("cast", in_ref(0), {{"dtype", "int32"}}), {Shape{3}});
  expect_values(ci.forward({{1.7f, -1.7f, 0.2f}}), {1, -1, 0});  // truncation toward zero
}

// Central differences of sum(y) at positive inputs for the operations the registry's gradient
// check (inputs of both signs) leaves out.
TEST(TfOpLambda, PositiveDomainOperationsMatchNumericalGradients) {
  const std::vector<Json> cfgs = {op_cfg("math.sqrt", in_ref(0)), op_cfg("math.rsqrt", in_ref(0)),
                                  op_cfg("math.log", in_ref(0)),
                                  op_cfg("math.pow", in_ref(0), {{"y", in_ref(1)}}),
                                  op_cfg("math.pow", 2.0, {{"y", in_ref(0)}})};
  for (const Json& cfg : cfgs) {
    const bool two = cfg["call"]["first"].is_object() && cfg["call"]["kwargs"].contains("y") &&
                     cfg["call"]["kwargs"]["y"].is_object();
    std::vector<Shape> shapes(two ? 2 : 1, Shape{3});
    OpRun r("TFOpLambda", cfg, shapes);
    std::vector<std::vector<float>> x(shapes.size(), {0.5f, 1.3f, 2.1f});
    if (two) x[1] = {0.7f, -1.2f, 2.5f};
    r.forward(x);
    r.backward(std::vector<float>(3, 1.0f));
    const auto grads = r.dx;
    for (size_t k = 0; k < x.size(); ++k)
      for (size_t i = 0; i < 3; ++i) {
        const float h = 1e-3f;
        auto xp = x, xm = x;
        xp[k][i] += h;
        xm[k][i] -= h;
        double sp = 0, sm = 0;
        for (float v : r.forward(xp)) sp += v;
        for (float v : r.forward(xm)) sm += v;
        EXPECT_NEAR(grads[k][i], (sp - sm) / (2 * h), 2e-2 * (1 + std::fabs(grads[k][i])))
            << cfg.dump() << " input " << k << " at " << i;
      }
  }
}

std::string refusal(const char* cls, const Json& cfg, std::vector<Shape> in) {
  try {
    OpRun r(cls, cfg, std::move(in));
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

TEST(TfOpLambda, RefusesUnknownFunctionsArgumentsAndTheBatchAxisByName) {
  const std::string unknown =
      refusal("TFOpLambda", op_cfg("image.resize", in_ref(0), {{"size", Json{2, 2}}}), {Shape{3}});
  EXPECT_NE(unknown.find("'image.resize'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("math.reduce_mean"), std::string::npos) << unknown;  // lists them
  const std::string arg =
      refusal("TFOpLambda", op_cfg("math.reduce_mean", in_ref(0), {{"axes", 1}}), {Shape{3}});
  EXPECT_NE(arg.find("'axes'"), std::string::npos) << arg;
  for (const Json& cfg : {op_cfg("math.reduce_mean", in_ref(0), {{"axis", 0}}),
                          op_cfg("concat", Json{in_ref(0), in_ref(1)}, {{"axis", 0}})}) {
    const std::string m = refusal(
        "TFOpLambda", cfg, std::vector<Shape>(cfg["function"] == "concat" ? 2 : 1, Shape{3}));
    EXPECT_NE(m.find("batch axis"), std::string::npos) << m;
  }
  const std::string none =
      refusal("TFOpLambda", op_cfg("math.reduce_sum", in_ref(0), {{"axis", nullptr}}), {Shape{3}});
  EXPECT_NE(none.find("batch axis"), std::string::npos) << none;
  const std::string batch_slice = refusal(
      "SlicingOpLambda",
      op_cfg("__operators__.getitem", in_ref(0), {{"slice_spec", Json{sl(1, nullptr, nullptr)}}}),
      {Shape{3}});
  EXPECT_NE(batch_slice.find("batch axis"), std::string::npos) << batch_slice;
  const std::string reshape =
      refusal("TFOpLambda", op_cfg("reshape", in_ref(0), {{"shape", Json{4, 3}}}), {Shape{3}});
  EXPECT_NE(reshape.find("batch axis"), std::string::npos) << reshape;
  const std::string wrong_class = refusal(
      "TFOpLambda", op_cfg("__operators__.getitem", in_ref(0), {{"slice_spec", 0}}), {Shape{3}});
  EXPECT_NE(wrong_class.find("SlicingOpLambda"), std::string::npos) << wrong_class;
}

}  // namespace
}  // namespace nnfleet

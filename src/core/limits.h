// Every limit nnfleet puts on its inputs (plans, Keras model files, data files), in one place.
// Input beyond a limit is refused with an error naming the file and the limit, before anything
// is allocated or walked for it: these bound memory, time and stack depth on hostile or corrupt
// files, and keep every integer inside the type the code stores it in. README.md ("Input
// limits") lists them for users; keep the two in step.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nnfleet::limits {

// ---- Structured documents: plans (YAML or JSON) and Keras configs (JSON) ----

// Levels of nesting of a JSON or YAML document (a list or mapping inside another is one level).
// Checked while parsing, before any value is copied or converted recursively. Real Keras configs
// nest about 11 levels (a model nested 16 deep about 80); plans fewer than 10.
inline constexpr int kMaxNestingDepth = 128;
// Values (scalars, lists, mappings) a plan may hold after YAML aliases are expanded: bounds an
// alias bomb ("billion laughs"). A grid of 100,000 values is 100,001 of them; a plan listing
// 8,000 models explicitly about 120,000.
inline constexpr size_t kMaxPlanValues = 500'000;
// Bytes of text a plan holds after aliases are expanded: its scalars plus the field path of every
// value (which the plan keeps for its messages). Bounds an alias bomb of long strings.
inline constexpr size_t kMaxPlanTextBytes = size_t{128} << 20;
// Bytes of a plan file.
inline constexpr uint64_t kMaxPlanBytes = uint64_t{64} << 20;
// Models one plan entry may expand to over its grid.
inline constexpr size_t kMaxModelsPerEntry = 100'000;
// Models of one plan in all (its entries and grids together). A model's spec costs about 2 KB
// while the plan is loaded, and loading 8,000 tiny models takes about a second: split larger
// fleets into several plans.
inline constexpr size_t kMaxPlanModels = 100'000;
// Characters of a model name (it becomes a file name).
inline constexpr size_t kMaxModelNameLength = 100;

// ---- Integers ----

// Largest integer in a layer config (units, filters, kernel_size, strides, ...) and in the
// plan's integer settings (epochs, batch_size, patience, ...): they are stored as 32-bit ints.
// Larger values, fractions and non-finite numbers are refused, never truncated or cast.
inline constexpr int64_t kMaxConfigInt = INT32_MAX;
// Largest size of one dimension of a model's input (Keras batch_input_shape and friends).
inline constexpr int64_t kMaxDimension = INT32_MAX;
// Class labels are stored as 32-bit ints: a label file (int64, float) with a value outside
// [0, kMaxLabel] is refused, never wrapped.
inline constexpr int64_t kMaxLabel = INT32_MAX;

// ---- Keras model files ----

// Models nested inside models (Sequential in Functional in ...).
inline constexpr int kMaxModelNesting = 16;
// Bytes of a JSON member of a .keras archive, or of a to_json() architecture file.
inline constexpr uint64_t kMaxJsonBytes = uint64_t{64} << 20;
// Bytes of the weights member of a .keras archive (it is read into memory): at most what the
// config's parameters need, and never more than kMaxWeightsBytes. Checked on the sizes the
// archive declares before anything is inflated; inflation stops at the declared size.
//  - kWeightsBytesPerParam: six copies of each parameter at 8 bytes (float64 variables): the
//    weights, and up to five optimizer slots (Adam with amsgrad: m, v, v_hat; with EMA and
//    gradient accumulation one more each). Real files need 4 (float32, none) to 12 (Adam).
//  - kWeightsBytesPerLayer: HDF5's groups and object headers of one layer (its own and its
//    variables' and slots' datasets); h5py writes about 2 KB per group and 1 KB per dataset.
//  - kWeightsFixedBytes: the superblock, the root, optimizer and metrics groups and metadata.
inline constexpr uint64_t kMaxWeightsBytes = uint64_t{8} << 30;
inline constexpr uint64_t kWeightsBytesPerParam = 48;
inline constexpr uint64_t kWeightsBytesPerLayer = uint64_t{64} << 10;
inline constexpr uint64_t kWeightsFixedBytes = uint64_t{1} << 20;
// Inflated bytes per compressed byte of a weights member that inflates to more than
// kWeightsRatioFloorBytes. Keras writes the member stored (1:1); float weights deflate to about
// 1.1:1 and an untrained model's zero optimizer slots bring a file to about 3:1, while a bomb
// needs deflate's 1032:1 to be cheap to ship. Small members (metadata-heavy, compressing 30:1
// or more) are bounded by the size alone.
inline constexpr uint64_t kMaxWeightsRatio = 100;
inline constexpr uint64_t kWeightsRatioFloorBytes = uint64_t{16} << 20;
// Bytes of one HDF5 attribute (model_config, layer_names, ...).
inline constexpr size_t kMaxAttrBytes = size_t{64} << 20;
// Parameters of one model (a Keras file's or a plan's); floats of one sample at a layer's output.
inline constexpr size_t kMaxParams = size_t{1} << 28;
inline constexpr int64_t kMaxSampleFloats = int64_t{1} << 26;
// Groups of a Keras 3 weights file that are indexed, and how deep.
inline constexpr size_t kMaxWeightGroups = 200'000;
inline constexpr int kMaxWeightGroupDepth = 32;

// ---- Data files ----

// Elements of one array (.npy, .npz member, IDX), whatever the file claims.
inline constexpr int64_t kMaxArrayElements = int64_t{1} << 40;
// Bytes of an .npy header.
inline constexpr uint32_t kMaxNpyHeaderBytes = uint32_t{1} << 20;
// Decompressed bytes per compressed byte of a .gz IDX file (deflate's own maximum is 1032).
inline constexpr uint64_t kMaxDeflateRatio = 1032;

}  // namespace nnfleet::limits

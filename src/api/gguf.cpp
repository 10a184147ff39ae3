// The public GGUF reader: io::GgufFile behind a shared handle, its metadata and tensor table copied once into
// the public structs, and the dequantizer over raw bytes (docs/gguf.md §9).
#include "io/gguf.hpp"

#include <samebits/errors.hpp>
#include <samebits/gguf.hpp>

#include "numerics/gguf_quants.hpp"

namespace samebits {

struct GgufFile::Impl {
  std::unique_ptr<io::GgufFile> file;
  std::vector<GgufKeyValue> metadata;
  std::vector<GgufTensorInfo> tensors;

  explicit Impl(std::unique_ptr<io::GgufFile> f) : file(std::move(f)) {
    for (const std::string& key : file->keys()) {
      metadata.push_back({key, *file->find(key)});
    }
    for (const io::GgufTensor& t : file->tensors())
      tensors.push_back(
          {t.name, t.ne, t.type, numerics::ggml_type_info(t.type).name, t.offset, t.nbytes, t.elements});
  }
};

GgufFile GgufFile::open(const std::string& path) {
  return GgufFile(std::make_shared<const Impl>(std::make_unique<io::GgufFile>(path)));
}

GgufFile GgufFile::from_bytes(const std::string& name, std::string bytes) {
  return GgufFile(std::make_shared<const Impl>(std::make_unique<io::GgufFile>(name, std::move(bytes))));
}

const std::string& GgufFile::path() const { return impl_->file->path(); }
std::uint32_t GgufFile::version() const { return impl_->file->version(); }
std::uint64_t GgufFile::file_bytes() const { return impl_->file->file_bytes(); }
std::uint64_t GgufFile::alignment() const { return impl_->file->alignment(); }
std::uint64_t GgufFile::data_offset() const { return impl_->file->data_offset(); }
const std::vector<GgufKeyValue>& GgufFile::metadata() const { return impl_->metadata; }
const std::vector<GgufTensorInfo>& GgufFile::tensors() const { return impl_->tensors; }

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const GgufKeyValue& kv : impl_->metadata)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const io::GgufTensor* t = impl_->file->find_tensor(name);
  return t == nullptr ? nullptr
                      : &impl_->tensors[static_cast<std::size_t>(t - impl_->file->tensors().data())];
}

std::vector<float> GgufFile::dequantize(std::string_view name) const { return impl_->file->dequantize(name); }

void GgufFile::check_finite() const {
  for (const io::GgufTensor& t : impl_->file->tensors()) impl_->file->check_finite(t);
}

std::string gguf_value_type_name(GgufValueType type) { return io::gguf_type_name(type); }

std::string gguf_tensor_type_name(std::uint32_t type) { return numerics::ggml_type_info(type).name; }

bool gguf_tensor_type_supported(std::uint32_t type) { return numerics::ggml_type_info(type).supported; }

std::pair<std::uint32_t, std::uint32_t> gguf_tensor_type_block(std::uint32_t type) {
  const numerics::GgmlTypeInfo info = numerics::ggml_type_info(type);
  return {info.block_elements, info.block_bytes};
}

std::vector<float> gguf_dequantize(std::uint32_t type, const void* bytes, std::size_t size,
                                   std::uint64_t count) {
  const std::string where = "samebits gguf_dequantize: ";
  const numerics::GgmlTypeInfo info = numerics::ggml_type_info(type);
  if (!info.supported)
    throw_value_error(where + "ggml type " + info.name + " (" + std::to_string(type) +
                      ") is refused by name; samebits decodes F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
                      "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (docs/gguf.md §5)");
  if (count % info.block_elements != 0)
    throw_value_error(where + "count " + std::to_string(count) + " is not a multiple of the " + info.name +
                      " block of " + std::to_string(info.block_elements));
  const std::uint64_t blocks = count / info.block_elements;
  if (blocks > size / info.block_bytes || blocks * info.block_bytes != size)
    throw_value_error(where + std::to_string(count) + " " + info.name + " elements take " +
                      std::to_string(blocks) + " blocks of " + std::to_string(info.block_bytes) +
                      " bytes, the buffer holds " + std::to_string(size));
  std::vector<float> out(static_cast<std::size_t>(count));
  const std::int64_t bad =
      numerics::ggml_dequantize_twin(type, static_cast<const unsigned char*>(bytes), blocks, out.data());
  if (bad >= 0)
    throw_value_error(where + "block " + std::to_string(bad) + " of " + info.name + " holds a non-finite " +
                      (info.block_elements == 1 ? "value" : "scale") + "; refused (docs/gguf.md §7.2)");
  return out;
}

}  // namespace samebits

// Binding of samebits::Tokenizer, TokenStreamDecoder and the native ChatTemplate renderers:
// samebits/models/_tokenizer.py wraps these objects.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <samebits/chat_template.hpp>
#include <samebits/tokenizer.hpp>
#include <string>
#include <vector>

#include "bindings.hpp"

namespace nb = nanobind;

namespace samebits::python {

namespace {

nb::bytes to_bytes(const std::string& s) { return nb::bytes(s.data(), s.size()); }

void bind_tokenizer(nb::module_& m) {
  nb::class_<Tokenizer>(m, "TokenizerEngine")
      .def_static("from_pretrained",
                  [](const std::string& path) {
                    nb::gil_scoped_release release;
                    return Tokenizer::from_pretrained(path);
                  })
      .def_static("from_json",
                  [](const std::string& json, std::optional<std::string> config, const std::string& source) {
                    nb::gil_scoped_release release;
                    return Tokenizer::from_json(
                        json, config ? std::optional<std::string_view>(*config) : std::nullopt, source);
                  })
      .def("encode",
           [](const Tokenizer& self, nb::bytes data, bool add_special_tokens, bool allow_special) {
             const std::string text(data.c_str(), data.size());
             nb::gil_scoped_release release;
             return self.encode(text, add_special_tokens, allow_special);
           })
      .def("decode_bytes",
           [](const Tokenizer& self, const std::vector<std::int32_t>& ids, bool skip_special_tokens) {
             std::string out;
             {
               nb::gil_scoped_release release;
               out = self.decode_bytes(ids, skip_special_tokens);
             }
             return to_bytes(out);
           })
      .def("decode",
           [](const Tokenizer& self, const std::vector<std::int32_t>& ids, bool skip_special_tokens) {
             nb::gil_scoped_release release;
             return self.decode(ids, skip_special_tokens);
           })
      .def("token_bytes",
           [](const Tokenizer& self, std::int32_t id) -> nb::object {
             const auto bytes = self.token_bytes(id);
             if (!bytes) return nb::none();
             return to_bytes(*bytes);
           })
      .def("is_special", &Tokenizer::is_special)
      .def_prop_ro("n_vocab", &Tokenizer::n_vocab)
      .def_prop_ro("bos_ids", [](const Tokenizer& self) { return self.bos_ids(); })
      .def_prop_ro("eos_ids", [](const Tokenizer& self) { return self.eos_ids(); })
      .def_prop_ro("bos_token_id", &Tokenizer::bos_token_id)
      .def_prop_ro("eos_token_id", &Tokenizer::eos_token_id)
      .def_prop_ro("chat_template", &Tokenizer::chat_template)
      .def_prop_ro("source", &Tokenizer::source)
      .def("describe", &Tokenizer::describe)
      .def_static("unicode_version", &Tokenizer::unicode_version);
  nb::class_<ChatTemplate>(m, "ChatTemplateEngine")
      .def_static("recognize", &ChatTemplate::recognize)
      .def_prop_ro("family", &ChatTemplate::family)
      .def_prop_ro("end_of_turn", &ChatTemplate::end_of_turn)
      .def_prop_ro("default_system", &ChatTemplate::default_system)
      .def("render",
           [](const ChatTemplate& self, const std::vector<std::pair<std::string, std::string>>& messages,
              bool add_generation_prompt) {
             std::vector<ChatMessage> turns;
             for (const auto& [role, content] : messages) turns.push_back({role, content});
             return self.render(turns, add_generation_prompt);
           });
  nb::class_<TokenStreamDecoder>(m, "TokenStreamDecoderEngine")
      .def(nb::init<Tokenizer, bool>())
      .def("push", &TokenStreamDecoder::push)
      .def("finish", &TokenStreamDecoder::finish)
      .def_prop_ro("pending_bytes", &TokenStreamDecoder::pending_bytes);
}

const Registration kRegistration{&bind_tokenizer, 80};

}  // namespace

}  // namespace samebits::python

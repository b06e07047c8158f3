#include "minivit/inspect/explorer.h"

#include <algorithm>
#include <bit>
#include <string>

#include "explorer_template.h"  // kExplorerTemplate: src/inspect/explorer.html
#include "minivit/core/error.h"
#include "minivit/core/progress.h"
#include "minivit/formats/config_file.h"

namespace minivit {
namespace {

// Standard base64 (RFC 4648) with padding, as JavaScript's atob reads it.
std::string base64(const void* data, size_t bytes) {
  static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((bytes + 2) / 3 * 4);
  for (size_t i = 0; i < bytes; i += 3) {
    const uint32_t n = uint32_t(p[i]) << 16 | (i + 1 < bytes ? uint32_t(p[i + 1]) << 8 : 0) |
                       (i + 2 < bytes ? uint32_t(p[i + 2]) : 0);
    out += kDigits[n >> 18 & 63];
    out += kDigits[n >> 12 & 63];
    out += i + 1 < bytes ? kDigits[n >> 6 & 63] : '=';
    out += i + 2 < bytes ? kDigits[n & 63] : '=';
  }
  return out;
}

// Floats as the page decodes them: little-endian float32, which is how this program's
// targets hold them in memory.
static_assert(std::endian::native == std::endian::little, "the page reads little-endian float32");
template <class Tensor>
std::string floats_base64(const Tensor& t) {
  return base64(t.data(), t.size() * sizeof(float));
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

nlohmann::ordered_json explorer_data(const ExplorerPage& p) {
  const Explanation& e = *p.explanation;
  const ModelConfig& m = *p.model;
  const std::string png = encode_png(render_input(*p.seen, 1));
  nlohmann::ordered_json j;
  j["format"] = "minivit-explorer-1";
  j["title"] = p.title;
  j["source"] = p.source;
  j["image"] = {{"png", base64(png.data(), png.size())}, {"size", m.image_size}, {"channels", m.channels}};
  j["grid"] = m.grid();
  j["patch_size"] = m.patch_size;
  j["layers"] = m.depth;
  j["heads"] = m.heads;
  j["tokens"] = m.tokens();
  j["cls"] = m.has_cls_token();
  j["pool"] = config_name(m.pool);
  j["attention_form"] = p.attention_form;
  j["attention"] = floats_base64(e.maps.att);
  if (m.pool == PoolKind::seq) j["pool_weights"] = floats_base64(e.maps.pool_weights);
  j["rollout_defaults"] = {{"fusion", fusion_name(p.fusion)}, {"discard", p.discard}};
  j["classes"] = *p.class_names;
  j["probabilities"] = e.maps.probs;
  const auto top = std::max_element(e.maps.probs.begin(), e.maps.probs.end());
  j["predicted"] = int(top - e.maps.probs.begin());
  j["label"] = p.label >= 0 ? nlohmann::ordered_json(p.label) : nlohmann::ordered_json(nullptr);
  j["explained_class"] = e.class_index;
  j["grad_rollout"] = floats_base64(e.grad_rollout);
  return j;
}

std::string render_explorer_html(const ExplorerPage& page) {
  std::string data = explorer_data(page).dump();
  // Inside <script> only "</" can end the element early; JSON reads "<\/" as "</".
  for (size_t at = data.find("</"); at != std::string::npos; at = data.find("</", at + 3))
    data.replace(at, 2, "<\\/");
  std::string html = kExplorerTemplate;
  const std::string token = "__MINIVIT_DATA__";
  const size_t at = html.find(token);
  if (at == std::string::npos || html.find(token, at + 1) != std::string::npos)
    throw Error("the explorer template must hold __MINIVIT_DATA__ exactly once");
  html.replace(at, token.size(), data);
  return html;
}

Canvas render_thumbnail(const Image8& seen, const Tensor2& map, int side) {
  const int S = int(seen.shape(1)), scale = std::max(1, side / S), px = S * scale;
  Canvas c(px, px);
  if (seen.shape(0) == 1)
    c.draw_image_gray(0, 0, px, px, seen.data(), S, S);
  else
    c.draw_image_rgb(0, 0, px, px, seen.data(), S, S);
  const auto [lo, hi] = std::minmax_element(map.begin(), map.end());
  c.blend_heatmap(0, 0, px, px, map.data(), int(map.shape(0)), int(map.shape(1)), 0.6f, *lo, *hi,
                  Interp::nearest);
  return c;
}

std::string render_gallery_html(const std::vector<GalleryItem>& items, const std::string& title,
                                const nlohmann::ordered_json* stats) {
  std::vector<const GalleryItem*> order;
  for (const GalleryItem& it : items) order.push_back(&it);
  std::stable_partition(order.begin(), order.end(), [](const GalleryItem* it) { return it->misclassified; });
  const auto wrong = std::count_if(items.begin(), items.end(), [](const GalleryItem& it) { return it.misclassified; });
  const auto known = std::count_if(items.begin(), items.end(), [](const GalleryItem& it) { return !it.label.empty(); });

  std::string h =
      "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>minivit attention: " +
      html_escape(title) +
      "</title>\n<style>\n"
      "body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; padding: 0 1em; color: #222; }\n"
      ".grid { display: flex; flex-wrap: wrap; gap: 12px; }\n"
      "a.gallery-item { display: block; width: 136px; padding: 6px; border: 1px solid #ddd; border-radius: 6px; "
      "text-decoration: none; color: #222; font-size: 12px; }\n"
      "a.gallery-item:hover { border-color: #1f77b4; box-shadow: 0 0 4px #1f77b4; }\n"
      "a.gallery-item.wrong { border-color: #d62728; background: #fff5f5; }\n"
      "a.gallery-item img { width: 112px; height: 112px; image-rendering: pixelated; display: block; margin: 0 auto 4px; }\n"
      ".bad { color: #d62728; font-weight: 600; } .muted { color: #666; }\n"
      "table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 13px; }\n"
      "td, th { padding: 2px 8px; text-align: right; border-bottom: 1px solid #eee; }\n"
      "img.stats { max-width: 100%; border: 1px solid #ddd; }\n"
      "</style>\n</head>\n<body>\n<h1>" +
      html_escape(title) + "</h1>\n";
  if (!items.empty()) {
    h += "<p>" + std::to_string(items.size()) + " images";
    if (known > 0)
      h += ", " + std::to_string(wrong) + " of " + std::to_string(known) +
           " labelled ones misclassified (shown first, outlined in red)";
    h += ". Each thumbnail shows the class-specific gradient rollout of the predicted class over the "
         "image; click it to open that image's explorer.</p>\n<div class=\"grid\">\n";
    for (const GalleryItem* it : order) {
      h += "<a class=\"gallery-item" + std::string(it->misclassified ? " wrong" : "") + "\" href=\"" +
           html_escape(it->dir) + "/index.html\"><img src=\"" + html_escape(it->dir) +
           "/thumb.png\" alt=\"\"><b>" + html_escape(it->name) + "</b><br>";
      if (!it->label.empty()) h += "label " + html_escape(it->label) + "<br>";
      h += std::string(it->misclassified ? "<span class=\"bad\">" : "<span>") + "predicted " +
           html_escape(it->predicted) + strprintf(" (%.1f%%)", 100.0 * it->probability) + "</span></a>\n";
    }
    h += "</div>\n";
  }
  if (stats) {
    const auto& s = *stats;
    h += "<h2>Attention statistics</h2>\n<p>Over " + std::to_string(s["images"].get<int64_t>()) + " images (" +
         html_escape(s["source"].get<std::string>()) +
         "). Left: the mean attention distance of each head (points) and their mean (line) against depth, "
         "in patches: " +
         html_escape(s["definitions"]["distance"].get<std::string>()) +
         ". Right: the mean entropy of the attention rows, in nats (uniform attention: " +
         strprintf("%.2f", s["uniform_entropy"].get<double>()) +
         ").</p>\n<img class=\"stats\" src=\"stats.png\" alt=\"attention distance and entropy per layer\">\n"
         "<table>\n<tr><th>layer</th><th>distance per head</th><th>entropy per head</th></tr>\n";
    for (const auto& layer : s["per_layer"]) {
      auto row = [](const nlohmann::ordered_json& values) {
        std::string out;
        for (const auto& v : values) out += strprintf("%s%.2f", out.empty() ? "" : " ", v.get<double>());
        return out;
      };
      h += "<tr><td>" + std::to_string(layer["layer"].get<int>() + 1) + "</td><td>" + row(layer["distance"]) +
           "</td><td>" + row(layer["entropy"]) + "</td></tr>\n";
    }
    h += "</table>\n<p class=\"muted\">The numbers are in stats.json.</p>\n";
  }
  h += "</body>\n</html>\n";
  return h;
}

}  // namespace minivit

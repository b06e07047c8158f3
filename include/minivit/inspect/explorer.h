#pragma once
// The pages `minivit attention` writes: the explorer of one image (index.html: the input
// with its patch grid; click or hover a token to see where it looks in every layer and
// head, the rollout seen from it, the class probabilities and the class-specific gradient
// rollout) and the gallery of many images. Each page is one self-contained file: the data
// is embedded, the script is plain JavaScript, and it opens from file:// with no server.
//
// The explorer is src/inspect/explorer.html, carried in the program as a string; its one
// placeholder __MINIVIT_DATA__ becomes the JSON of explorer_data. Numbers the page draws
// come from that JSON: the attention tensor exactly as attention.npy holds it (float32,
// base64), so what the page shows is what the file says.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "minivit/core/config.h"
#include "minivit/data/image_io.h"
#include "minivit/inspect/attention_maps.h"
#include "minivit/inspect/grad_rollout.h"

namespace minivit {

struct ExplorerPage {
  const Explanation* explanation = nullptr;
  const Image8* seen = nullptr;  // (C, S, S) the input as the model saw it
  const ModelConfig* model = nullptr;
  const std::vector<std::string>* class_names = nullptr;  // K names
  Fusion fusion = Fusion::mean;  // the rollout controls' starting values
  double discard = 0.0;
  int label = -1;                // the image's true class, -1 when unknown
  std::string title;             // headline, e.g. "predicted Sandal (97.1%), label Sandal"
  std::string source;            // where the image and the checkpoint came from
  std::string attention_form;    // model.attention as the config spells it
};

// The page's data (format "minivit-explorer-1"); see explorer.html for the keys it reads.
nlohmann::ordered_json explorer_data(const ExplorerPage& page);

// explorer.html with explorer_data embedded.
std::string render_explorer_html(const ExplorerPage& page);

struct GalleryItem {
  std::string dir;        // the image's folder, relative to the gallery
  std::string name;       // what the image is, e.g. "test 17" or a file name
  std::string label;      // true class name, empty when unknown
  std::string predicted;  // predicted class name
  double probability = 0.0;
  bool misclassified = false;
};

// The gallery: misclassified images first (then in the given order), each a link
// (a.gallery-item to DIR/index.html) with its thumbnail DIR/thumb.png, label and
// prediction; with `stats` (stats.json's content, may be null) its picture stats.png and
// a table of the per-layer means.
std::string render_gallery_html(const std::vector<GalleryItem>& items, const std::string& title,
                                const nlohmann::ordered_json* stats);

// A small picture for the gallery: the input with `map` (G, G) over it, scaled to its own
// range, `side` pixels square (rounded down to a multiple of the image size).
Canvas render_thumbnail(const Image8& seen, const Tensor2& map, int side = 112);

// Text made safe inside HTML elements and attribute values.
std::string html_escape(const std::string& text);

}  // namespace minivit

# Writes a header holding one text file as a C++ string constant, so the program carries
# the file (a page template) with it. Run as:
#   cmake -DIN=file -DOUT=header.h -DSYMBOL=kName -P embed_text.cmake
file(READ "${IN}" content)
if(content MATCHES "\\)minivit_embed\"")
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )minivit_embed\"")
endif()
get_filename_component(name "${IN}" NAME)
file(WRITE "${OUT}.tmp"
     "// Generated from ${name} by cmake/embed_text.cmake at build time; edit ${name} instead.\n"
     "#pragma once\n"
     "namespace minivit {\n"
     "inline constexpr char ${SYMBOL}[] = R\"minivit_embed(${content})minivit_embed\";\n"
     "}  // namespace minivit\n")
file(RENAME "${OUT}.tmp" "${OUT}")

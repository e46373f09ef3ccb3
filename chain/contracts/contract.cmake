# Included from chain/CMakeLists.txt (CMAKE_CURRENT_SOURCE_DIR is chain/).
# The contracts are compiled at build time with the pinned solc-js and
# embedded into the chain library as C strings (generated/<file>.c), so
# `ovt deploy` needs no node.js at run time.
if(NOT OVT_SOLCJS)
  message(FATAL_ERROR "solcjs not found in ${OVT_NODE_BIN}: run `npm ci` in ${CMAKE_SOURCE_DIR} "
                      "(it installs the pinned solc-js, anvil and cast from package-lock.json)")
endif()

# ovt_embed_contract(NAME OUTDIR PREFIX CFILE RUNS [IMPORTS...]): compiles
# chain/contracts/NAME.sol into OUTDIR (its own folder: it is emptied first)
# with the optimizer tuned for RUNS calls, and embeds contract NAME's bytecode
# and ABI as PREFIX_bytecode_hex and PREFIX_abi_json in CFILE; IMPORTS are the
# other .sol files (in chain/contracts/) it imports, so a change there
# compiles it again. OvtArbitration is tuned for 1,000 runs, not 10,000, so
# that its runtime stays under EIP-170's 24,576 bytes (docs/decisions.md).
function(ovt_embed_contract name outdir prefix cfile runs)
  set(sol chain/contracts/${name}.sol)
  set(stem ${outdir}/chain_contracts_${name}_sol_${name})
  list(TRANSFORM ARGN PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/contracts/ OUTPUT_VARIABLE imports)
  add_custom_command(
    OUTPUT ${cfile} ${stem}.bin ${stem}.abi
    COMMAND ${CMAKE_COMMAND} -E rm -rf ${outdir}
    COMMAND ${OVT_SOLCJS} --bin --abi --optimize --optimize-runs ${runs}
            --base-path ${CMAKE_SOURCE_DIR} -o ${outdir} ${sol}
    COMMAND ${CMAKE_COMMAND} -DBIN=${stem}.bin -DABI=${stem}.abi
            -DOUT=${cfile} -DPREFIX=${prefix} -P ${CMAKE_CURRENT_SOURCE_DIR}/contracts/embed.cmake
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
    DEPENDS ${CMAKE_SOURCE_DIR}/${sol} ${imports} ${CMAKE_CURRENT_SOURCE_DIR}/contracts/embed.cmake
    COMMENT "Compiling ${sol} with solcjs (optimizer on) and embedding it"
    VERBATIM)
  target_sources(ovt_chain PRIVATE ${cfile})
endfunction()

ovt_embed_contract(OvtArbitration ${CMAKE_BINARY_DIR}/solc chain_arb
                   ${CMAKE_BINARY_DIR}/generated/ovt_arbitration_code.c 1000)
ovt_embed_contract(OvtNarrow ${CMAKE_BINARY_DIR}/solc-narrow chain_narrow
                   ${CMAKE_BINARY_DIR}/generated/ovt_narrow_code.c 10000 OvtArbitration.sol)

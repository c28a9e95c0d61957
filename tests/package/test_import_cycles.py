"""No module of the package imports, through any chain, a module that imports it: a circle makes the
import order decide what is defined, and the layers of pyproject.toml's contracts say nothing inside
one layer (webhook.commands.cli and webhook.commands.completion once imported each other)."""

import grimp


def test_no_module_of_the_package_is_part_of_an_import_circle():
    graph = grimp.build_graph("webhook", include_external_packages=False)
    circles = sorted(
        {
            tuple(sorted((module, imported)))
            for module in graph.modules
            for imported in graph.find_modules_directly_imported_by(module)
            if graph.chain_exists(importer=imported, imported=module)
        }
    )
    assert circles == []

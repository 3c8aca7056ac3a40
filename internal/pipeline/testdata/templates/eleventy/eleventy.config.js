export default function (eleventyConfig) {
	eleventyConfig.addPassthroughCopy("style.css");
}

export const config = {
	markdownTemplateEngine: "njk",
	htmlTemplateEngine: "njk",
	dir: {
		includes: "_includes",
		output: "_site",
	},
};
